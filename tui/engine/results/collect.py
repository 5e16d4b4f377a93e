"""The results document of a running (or just stopped) engine: the plain data `build_results` wants, taken
from the live `Store` in one go, so the per-level statistics, histograms, peaks and server figures all count
the same requests. `tui.engine.results.build` makes the document; this only gathers its inputs."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from tui.engine.aggregate.level_histograms import level_histograms, window_ns
from tui.engine.aggregate.levels import LevelAgg
from tui.engine.aggregate.series import Timeline
from tui.engine.aggregate.store import Store
from tui.engine.results.build import (
    ClientSummary,
    LevelExtras,
    RunInfo,
    ServerSummary,
    build_results,
    histograms_of,
    safe_url,
)
from tui.engine.results.model import CacheReset, Clock, Results
from tui.engine.server_metrics.level_figures import LevelSpan, level_spans_ns
from tui.engine.server_metrics.view import ServerView
from tui.engine.snapshot import LevelView, RampVerdict, Snapshot

SECOND_NS = 1_000_000_000


class Scrape(Protocol):
    """The server scraper as results need it (`tui.engine.host.server_scrape.ServerScrape`)."""

    def latest(self) -> ServerView | None: ...

    def level_summaries(self, view: ServerView, spans: list[LevelSpan]) -> dict[int, dict[str, Any]]: ...


def server_summary(view: ServerView, per_level: dict[int, dict[str, Any]]) -> ServerSummary:
    """The run's server figures beside each level's (`ServerView.level_summary` over the level's steady
    window, its whole span when it has none: the same clock, ``perf_counter_ns``, stamps the scrapes and the
    requests, so they line up)."""
    run = {
        "url": safe_url(view.url),
        "kind": view.kind,
        "model": view.model,
        "status": view.status,
        "message": view.message,
        "scrapes": view.scrapes,
        "failures": view.failures,
        "found": list(view.found),
        "restarts": view.resets,
        "canary_rate": view.canary.rate if view.canary is not None else None,
    }
    if view.late:  # a slow /metrics (`tui.engine.server_metrics.poller`): only then, older files unchanged
        run["late_scrapes"] = view.late
    return ServerSummary(run=run, levels=dict(per_level))


def max_output_tokens_per_s(timeline: Timeline, span: tuple[int, int]) -> float | None:
    """vLLM's peak output rate: the most tokens arriving in one whole second of ``span``, the span cut into
    seconds from its start (the timeline's buckets rounded to the nearest whole count per second). None for
    a span shorter than one second."""
    per_s = max(1, round(SECOND_NS / timeline.res_ns))
    b0, b1 = timeline.align(*span)
    whole = (b1 - b0) // per_s
    if whole == 0:
        return None
    tokens = timeline.b[Timeline.TOK, b0 : b0 + whole * per_s].reshape(whole, per_s).sum(axis=1)
    return float(tokens.max()) * SECOND_NS / (per_s * timeline.res_ns)


def max_concurrent_requests(agg: LevelAgg, span: tuple[int, int]) -> int | None:
    """vLLM's peak concurrency: over the successful requests sent in ``span`` (the stats' population), the
    most in flight during one second, cut from the span's start (a request counts in every second it
    touches). None without requests."""
    rows = agg.req.view()
    sel = (rows["sent_ns"] >= span[0]) & (rows["sent_ns"] < span[1])
    sent, end = rows["sent_ns"][sel], rows["end_ns"][sel]
    if sent.size == 0:
        return None
    first = (sent - span[0]) // SECOND_NS
    last = (end - span[0]) // SECOND_NS
    marks = np.zeros(int(last.max()) + 2, dtype=np.int64)
    np.add.at(marks, first, 1)
    np.add.at(marks, last + 1, -1)
    return int(np.cumsum(marks).max())


def between_scrapes_ttft(agg: LevelAgg, between_ns: Sequence[int] | None) -> tuple[float, int] | None:
    """The level's mean TTFT (ms) and count over its requests whose first token landed in ``between_ns``
    (after the first scrape, up to the last: the span the server's histogram deltas cover). None without
    the span, or when the level's rows are a sample (the counts could not be compared)."""
    if between_ns is None or not agg.req.exact:
        return None
    rows = agg.req.view()
    ttft = rows["ttft_ms"]
    first = rows["sent_ns"] + np.nan_to_num(ttft, nan=-1e18) * 1e6
    sel = (first > between_ns[0]) & (first <= between_ns[1]) & np.isfinite(ttft)
    n = int(sel.sum())
    return (float(ttft[sel].mean()), n) if n else None


def level_extras(
    store: Store, view: LevelView, extra: dict[str, Any], between_ns: Sequence[int] | None = None
) -> LevelExtras:
    """A level's counts, peaks and histograms beside its view (under the engine's lock); ``between_ns``:
    the scrapes its server TTFT parts lie between."""
    agg = store.levels[view.level_id]
    span = window_ns(view, store.t0_ns)
    return LevelExtras(
        cancelled=int(extra.get("cancelled", 0)),
        max_loop_lag_p99_ms=float(extra.get("max_loop_lag_p99_ms", 0.0)),
        max_cpu_share=float(extra.get("max_cpu_share", 0.0)),
        max_output_tokens_per_s=None if span is None else max_output_tokens_per_s(agg.timeline, span),
        max_concurrent_requests=None if span is None else max_concurrent_requests(agg, span),
        histograms=histograms_of(level_histograms(agg, view, store.t0_ns)),
        between_scrapes_ttft=between_scrapes_ttft(agg, between_ns),
    )


def collect_results(
    store: Store,
    snapshot: Callable[[], Snapshot],
    info: RunInfo,
    scrape: Scrape,
    *,
    interrupted: str | None,
    now_ns: int | None = None,
    ramp: RampVerdict | None = None,
    resets: Mapping[int, CacheReset] | None = None,
) -> Results:
    """Called under the engine's lock. The level views are forced fresh before ``snapshot`` is taken, so
    the snapshot shows them; ``interrupted`` says why the run was cut short, None when it finished.
    ``now_ns``: the engine's clock (a replay's recorded time), else now. ``ramp``: what the auto ramp said
    when it stopped, if it did. ``resets``: the prefix cache resets, by the level each came before."""
    now = time.perf_counter_ns() if now_ns is None else now_ns
    fresh: Sequence[tuple[LevelView, dict[str, Any]]] = store.level_views(now, force=True)
    snap = snapshot()
    marked = {lv.level_id: lv for lv in snap.levels}  # the same views, client-limited levels marked
    views = [(marked.get(lv.level_id, lv), extra) for lv, extra in fresh]
    client = ClientSummary(
        max_loop_lag_p99_ms=store.max_lag_ms,
        max_cpu_share=store.max_cpu,
        saturated=store.saturated_ever,
        saturated_spans_s=tuple((span[0], span[1]) for span in store.saturated_spans),
        notices=store.notices_with(snap.levels),
        lag_threshold_ms=store.saturation.lag_threshold_ms,
    )
    view = scrape.latest()
    server = None
    if view is not None:
        spans = level_spans_ns([lv for lv, _ in views], store.t0_ns, now)
        server = server_summary(view, scrape.level_summaries(view, spans))
    parts = {i: (f or {}).get("ttft_parts") or {} for i, f in (server.levels if server else {}).items()}
    levels = [
        (lv, level_extras(store, lv, dict(extra), parts.get(lv.level_id, {}).get("between_ns")))
        for lv, extra in views
    ]
    clock = Clock(perf_t0_ns=store.t0_ns, unix_t0_ns=time.time_ns() - (time.perf_counter_ns() - store.t0_ns))
    return build_results(
        info, snap, levels, client, interrupted=interrupted, server=server, clock=clock, ramp=ramp,
        resets=resets,
    )  # fmt: skip
