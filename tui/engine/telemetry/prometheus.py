"""The client's view as Prometheus metric families, made from one `Snapshot` at each scrape.

A collector rather than metric objects updated as requests finish: the store already keeps every counter and
whole-run histogram, so a scrape reads them and the load path does no work for it. Names follow Prometheus'
rules: ``tokentop_`` first, the unit in the name, ``_total`` on counters, seconds and ratios."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from tui import __version__
from tui.engine.redact import display_url
from tui.engine.server_metrics.view import CanaryFigures
from tui.engine.snapshot import Histogram, LevelView, Snapshot

PREFIX = "tokentop_"
BUCKET_STEP = 2
"""Every second edge of the display histogram (`tui.engine.aggregate.metrics.DISPLAY_EDGES_MS`): 5 buckets
a decade from 0.1 ms, ten of them below 10 ms, where vLLM's own stop at 1 ms, 5 ms, 10 ms."""
LATENCIES: tuple[tuple[str, str], ...] = (
    ("ttft_seconds", "Time to first token: first content chunk minus send, at the client."),
    ("tpot_seconds", "Time per output token: (E2E - TTFT) / (OSL - 1), per successful request."),
    ("itl_chunk_seconds", "Gap between consecutive content chunks (vLLM's itl), at the client."),
    ("e2e_seconds", "End-to-end latency of the successful requests, at the client."),
)


def histogram_family(name: str, doc: str, hist: Histogram) -> HistogramMetricFamily:
    """``hist`` (ms, over the whole run) as a Prometheus histogram in seconds. A bucket counts the display
    bins below its bound; values past the last edge count only in ``+Inf``."""
    edges, counts = hist.edges_ms, hist.counts
    buckets: list[tuple[str, float]] = []
    cumulative = 0
    for i in range(len(counts) - 1):
        cumulative += counts[i]
        if (i + 1) % BUCKET_STEP == 0:
            buckets.append((_le(edges[i + 1] / 1e3), cumulative))
    n = sum(counts)
    buckets.append(("+Inf", n))
    mean = hist.stats.mean
    total_s = mean * n / 1e3 if n and not math.isnan(mean) else 0.0
    return HistogramMetricFamily(PREFIX + name, doc, buckets=buckets, sum_value=total_s)


def _le(bound_s: float) -> str:
    """A bucket bound to four significant digits (0.0001585), as a float's text."""
    return repr(float(f"{bound_s:.4g}"))


def current_level(snap: Snapshot) -> LevelView | None:
    """The level the load is at now (the current target's), if it has a view yet."""
    for level in reversed(snap.levels):
        if level.level_id == snap.level_id:
            return level
    return None


def families(snap: Snapshot, *, load: bool = True, canary: CanaryFigures | None = None) -> Iterator[Metric]:
    """Every metric family of ``snap``: the run's info, the load's and client's figures where tokentop sends
    load (not ``load``: `tokentop watch`, which has neither), and the ``canary`` user's where one runs."""
    info = GaugeMetricFamily(
        PREFIX + "info",
        "The run: tokentop's version, the server (without credentials or query values), model and API.",
        labels=["version", "server", "model", "endpoint"],
    )
    info.add_metric([__version__, display_url(snap.base_url), snap.model, snap.endpoint], 1)
    yield info
    if load:
        yield from _client(snap)
    if canary is not None:
        yield from _canary(canary)


def _client(snap: Snapshot) -> Iterator[Metric]:
    """What the load's requests did, the load asked for, the current level and the client's health."""
    sent = snap.completed + snap.failed + snap.cancelled + snap.in_flight
    yield CounterMetricFamily(PREFIX + "requests_sent", "Requests sent (finished or in flight).", value=sent)
    yield CounterMetricFamily(PREFIX + "requests_completed", "Requests that succeeded.", value=snap.completed)
    failed = CounterMetricFamily(
        PREFIX + "requests_failed", "Requests that failed, by error class.", labels=["error_class"]
    )
    for klass, count in snap.errors:
        failed.add_metric([klass], count)
    yield failed
    yield CounterMetricFamily(
        PREFIX + "requests_cancelled",
        "Requests cut off by a stop (neither completed nor failed).",
        value=snap.cancelled,
    )
    yield GaugeMetricFamily(PREFIX + "requests_in_flight", "Requests sent and not finished.", snap.in_flight)
    yield CounterMetricFamily(
        PREFIX + "input_tokens", "Prompt tokens of the successful requests.", value=snap.input_tokens
    )
    yield CounterMetricFamily(
        PREFIX + "output_tokens", "Output tokens of the successful requests.", value=snap.output_tokens
    )
    yield GaugeMetricFamily(
        PREFIX + "output_tokens_per_second", "Output tokens/s over the last few seconds.", snap.output_tps
    )
    yield from _load(snap)
    for (name, doc), hist in zip(LATENCIES, _latency_histograms(snap), strict=True):
        yield histogram_family(name, doc, hist)
    yield from _level(current_level(snap))
    yield from _health(snap)


def _latency_histograms(snap: Snapshot) -> tuple[Histogram, ...]:
    empty = Histogram()
    return (
        snap.ttft_hist.get(None, empty),
        snap.itl_hist.get(("tpot", None), empty),
        snap.itl_hist.get(("chunk", None), empty),
        snap.e2e_hist,
    )


def _load(snap: Snapshot) -> Iterator[Metric]:
    load = snap.load
    yield GaugeMetricFamily(PREFIX + "level_id", "The current load level's id.", snap.level_id)
    unit = {"concurrency": "users", "rate": "requests_per_second", "trace": "trace_speed_ratio"}[load.mode]
    yield GaugeMetricFamily(
        PREFIX + "target_" + unit,
        "The load asked for now: users (closed loop), requests/s (open loop) or a trace's speed-up.",
        0.0 if load.paused else load.value,
    )
    yield GaugeMetricFamily(PREFIX + "load_paused", "1 while the load is paused.", float(load.paused))


def _level(level: LevelView | None) -> Iterator[Metric]:
    """The current level's own figures, over its steady window (the level table's)."""
    if level is None:
        return
    yield GaugeMetricFamily(
        PREFIX + "level_output_tokens_per_second",
        "Output tokens/s of the current level over its window (NaN while too short).",
        level.output_tps,
    )
    yield GaugeMetricFamily(
        PREFIX + "level_requests_completed", "Successful requests of the current level's window.",
        level.window_completed,
    )  # fmt: skip
    slo = level.slo
    if slo is None:
        return
    attainment = GaugeMetricFamily(
        PREFIX + "level_slo_attainment_ratio",
        "Share of the current level's requests meeting every SLO, with its 95 % Wilson bounds.",
        labels=["bound"],
    )
    for bound, value in (("estimate", slo.attainment), ("low", slo.low), ("high", slo.high)):
        attainment.add_metric([bound], value)
    yield attainment
    yield GaugeMetricFamily(
        PREFIX + "level_goodput_requests_per_second",
        "Requests/s of the current level that met every SLO.",
        slo.goodput_rps,
    )


def _health(snap: Snapshot) -> Iterator[Metric]:
    h = snap.health
    yield GaugeMetricFamily(PREFIX + "client_workers", "Engine worker processes.", h.workers)
    yield GaugeMetricFamily(
        PREFIX + "client_loop_lag_p99_seconds",
        "Highest event-loop lag p99 among the workers over the last few seconds (any stamp up to this late).",
        h.loop_lag_p99_ms / 1e3,
    )
    yield GaugeMetricFamily(
        PREFIX + "client_cpu_ratio",
        "Highest CPU share of one core among the workers over the last few seconds.",
        h.cpu_share,
    )
    yield GaugeMetricFamily(
        PREFIX + "client_saturated", "1 while the client itself is the limit (sustained).", float(h.saturated)
    )


def _canary(figures: CanaryFigures) -> Iterator[Metric]:
    """The canary user's TTFT over its live window (`tui.engine.host.canary`): the TTFT a new user would see
    now, from its one-token requests beside the load (or, watching, the only ones tokentop sends)."""
    yield GaugeMetricFamily(
        PREFIX + "canary_target_requests_per_second", "The canary user's requests/s asked for.", figures.rate
    )
    yield GaugeMetricFamily(
        PREFIX + "canary_requests", "Canary requests with a first token in the live window.", figures.n
    )
    yield GaugeMetricFamily(
        PREFIX + "canary_errors", "Canary requests that failed in the live window.", figures.errors
    )
    ttft = GaugeMetricFamily(
        PREFIX + "canary_ttft_seconds",
        "The canary's TTFT over the live window (mean, p99) and its latest; absent before one came in.",
        labels=["stat"],
    )
    for stat, ms in (("mean", figures.mean_ms), ("p99", figures.p99_ms), ("last", figures.last_ms)):
        if ms is not None:
            ttft.add_metric([stat], ms / 1e3)
    yield ttft


class SnapshotCollector(Collector):
    """A Prometheus collector that takes one snapshot per scrape (None: no engine yet, only the info)."""

    def __init__(self) -> None:
        self.source: Callable[[], Snapshot] | None = None
        """Set once the engine exists; the endpoint is bound before it, so a busy port fails first."""
        self.canary: Callable[[], CanaryFigures | None] | None = None
        """The canary user's live figures, read with each snapshot (None, or None read: no canary)."""
        self.load = True
        """False for an engine that sends no load (`tokentop watch`): only the info and the canary."""

    def collect(self) -> Iterator[Metric]:
        source, canary = self.source, self.canary
        if source is None:
            return iter(())
        return families(source(), load=self.load, canary=canary() if canary is not None else None)
