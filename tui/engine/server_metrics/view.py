"""What one scrape keeps (`Reading`) and the frozen view a face reads (`ServerView`), with per-level figures.

A `Reading` keeps only what the common signals need (a few gauges, the counters the rates read, the mapped
histograms) plus, for a server we do not recognise, its gauges by name; the raw text is dropped at once.
`ServerView` is built in the poller's thread and published whole, so a face only reads plain fields: the
current value of each signal, quantiles of the server's latency histograms over the live window, and the
readings themselves (a bounded ring) for histories and for `level_summary` over any [t_from, t_to].
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from itertools import pairwise
from types import MappingProxyType
from typing import Any, NamedTuple

from tui.engine.server_metrics.gpu import ENERGY, GPU_SIGNALS, energy_record, gpu_gauges, gpu_record
from tui.engine.server_metrics.kinds import GAUGES, HISTOGRAMS, MAPS, RATES, UNKNOWN, ServerMap
from tui.engine.server_metrics.parse import Buckets, Family, histogram, label_values, total
from tui.engine.server_metrics.parts import estimates, histogram_record, ttft_parts
from tui.engine.server_metrics.slots import Slots
from tui.engine.server_metrics.window import (
    Estimate,
    Point,
    counter_increase,
    counter_rate,
    histogram_increase,
    in_window,
    ratio_of_increases,
    time_weighted_mean,
)

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Reading:
    """One scrape, reduced to what the signals need. `t_ns`: `perf_counter_ns` midway through the request."""

    t_ns: int
    gauges: Mapping[str, float]
    """Signal -> value, for the gauge signals (and rate signals a server exports as a gauge)."""
    counters: Mapping[str, float]
    """Counter metric name -> value summed over label sets."""
    histograms: Mapping[str, Buckets]
    """Histogram signal -> buckets summed over label sets."""
    other_gauges: Mapping[str, float] = field(default_factory=dict)
    """An unrecognised server's gauges by family name (empty for a known server)."""
    started_s: float | None = None
    """The server process's start (``process_start_time_seconds``), when it says: a new one is a restart
    even once the new process's counters have climbed past the old ones."""
    areas: Mapping[str, float] = field(default_factory=dict)
    """Gauge signal -> its running area (value x ns, each reading held until the next) from the first
    scrape up to this one (`with_areas`); a gauge's mean over any window is then a difference of two."""


class CanaryFigures(NamedTuple):
    """The canary user's TTFT over the live window (`tui.engine.host.canary`): the TTFT a new user would
    see now, from one-token requests sent beside the load and never counted in it."""

    rate: float
    """Requests per second asked for."""
    n: int
    """Canary requests whose first token came in the window."""
    mean_ms: float | None
    p99_ms: float | None
    last_ms: float | None
    errors: int
    """Canary requests that failed in the window."""


class Hold(NamedTuple):
    """A gauge's latest reading and its running area up to it: what the next reading's area adds to."""

    t_ns: int
    value: float
    area: float


def with_areas(reading: Reading, last: dict[str, Hold]) -> Reading:
    """``reading`` with the running area of each of its gauges, carried on from ``last`` (each gauge's
    previous reading, updated here); the poller keeps ``last`` beside its ring, so a scrape costs a few
    additions, however long the ring."""
    areas = {}
    for signal, value in reading.gauges.items():
        held = last.get(signal)
        area = held.area + held.value * (reading.t_ns - held.t_ns) if held is not None else 0.0
        areas[signal] = area
        last[signal] = Hold(reading.t_ns, value, area)
    return replace(reading, areas=MappingProxyType(areas))


PROCESS_START = "process_start_time_seconds"
"""The start of the server's process, served by prometheus_client (vLLM, SGLang) on Linux."""


def read(families: Mapping[str, Family], t_ns: int, kind: str) -> Reading:
    """Reduce parsed families to a Reading by the map of `kind`; for `unknown`, every gauge by name."""
    server_map = MAPS.get(kind)
    if server_map is None:
        gauges = {
            f.name: v
            for f in families.values()
            if f.kind == "gauge" and (v := total(families, f.name)) is not None
        }
        return Reading(t_ns, _EMPTY, _EMPTY, _EMPTY, MappingProxyType(gauges))
    found_gauges: dict[str, float] = {}
    for signal, candidates in server_map.gauges.items():
        value = _first(families, candidates)
        if value is not None:
            found_gauges[signal] = value
    for signal, rate in server_map.rates.items():
        if rate.gauge is not None and (value := total(families, rate.gauge)) is not None:
            found_gauges[signal] = value
    found_gauges.update(gpu_gauges(families))  # a server that serves DCGM's names beside its own
    counters = {n: v for n in server_map.counters() if (v := total(families, n)) is not None}
    hists: dict[str, Buckets] = {}
    for signal, candidates in server_map.histograms.items():
        for name in candidates:
            buckets = histogram(families, name)
            if buckets is not None:
                hists[signal] = buckets
                break
    return Reading(
        t_ns,
        MappingProxyType(found_gauges),
        MappingProxyType(counters),
        MappingProxyType(hists),
        started_s=total(families, PROCESS_START),
    )


def _first(families: Mapping[str, Family], candidates: tuple[str, ...]) -> float | None:
    for name in candidates:
        value = total(families, name)
        if value is not None:
            return value
    return None


def model_of(families: Mapping[str, Family]) -> str | None:
    """The served model, from the `model_name` (vLLM, SGLang) or `model` label; several joined by commas."""
    for label in ("model_name", "model"):
        names = label_values(families, label)
        if names:
            return ",".join(names)
    return None


# --- figures over a window ----------------------------------------------------------------------------------


def around(readings: tuple[Reading, ...], t_from_ns: int, t_to_ns: int) -> tuple[Reading, ...]:
    """The readings a figure over [t_from_ns, t_to_ns] can use (sorted by time): those inside, the last one
    before (its value holds into the window) and the first one after (it ends the hold of the last inside).
    Found by bisection, so a level's figures cost its own scrapes, not the whole ring's. (A gauge missing from
    the reading before holds from none earlier: servers export the same gauges in every scrape.)"""
    start = max(bisect_right(readings, t_from_ns, key=_t_ns) - 1, 0)
    return readings[start : bisect_left(readings, t_to_ns, key=_t_ns) + 1]


def _t_ns(reading: Reading) -> int:
    return reading.t_ns


def gauge_mean(readings: tuple[Reading, ...], signal: str, t_from_ns: int, t_to_ns: int) -> float | None:
    """A gauge's time-weighted mean over [t_from_ns, t_to_ns], by `time_weighted_mean`'s rule, from the
    running areas of the two readings that hold at the window's ends (`with_areas`), found by bisection:
    a level of an hour costs what a level of a second does (but a gauge the server never exports costs a
    pass over the ring to find it missing). Readings made without areas (by hand, in tests) are read point
    by point."""
    if t_to_ns < t_from_ns:
        raise ValueError("t_to_ns is before t_from_ns")
    end_i = _last_with(readings, signal, bisect_right(readings, t_to_ns, key=_t_ns) - 1)
    if end_i < 0:
        return None  # no reading of it at or before the window's end
    start_i = _last_with(readings, signal, bisect_right(readings, t_from_ns, key=_t_ns) - 1)
    start_ns = t_from_ns
    if start_i < 0:  # none before the window: it starts at the first reading of the gauge
        start_i = next(i for i, r in enumerate(readings) if signal in r.gauges)
        start_ns = readings[start_i].t_ns
    held, end = readings[start_i], readings[end_i]
    if signal not in held.areas or signal not in end.areas:
        return time_weighted_mean(_gauge_points(readings, signal), t_from_ns, t_to_ns)
    if start_i == end_i:
        return held.gauges[signal]  # the window lies in one reading's hold (or has no length)
    # The areas grow over the hour: subtract them first, then add the ends, to keep the digits.
    area = end.areas[signal] - held.areas[signal]
    area += end.gauges[signal] * (t_to_ns - end.t_ns) - held.gauges[signal] * (start_ns - held.t_ns)
    return area / (t_to_ns - start_ns)


def _last_with(readings: tuple[Reading, ...], signal: str, i: int) -> int:
    """The index of the last reading at or before ``i`` that has ``signal`` (-1: none); a server exports
    the same gauges in every scrape, so this rarely steps back."""
    while i >= 0 and signal not in readings[i].gauges:
        i -= 1
    return i


def _gauge_points(readings: tuple[Reading, ...], signal: str) -> list[Point]:
    return [(r.t_ns, r.gauges[signal]) for r in readings if signal in r.gauges]


def _counter_points(readings: tuple[Reading, ...], name: str) -> list[Point]:
    return [(r.t_ns, r.counters[name]) for r in readings if name in r.counters]


def _summed_points(readings: tuple[Reading, ...], names: tuple[str, ...]) -> list[Point]:
    """Several counters added reading by reading (only readings that carry all of them)."""
    return [
        (r.t_ns, sum(r.counters[n] for n in names)) for r in readings if all(n in r.counters for n in names)
    ]


def rate_signal(
    server_map: ServerMap, readings: tuple[Reading, ...], signal: str, t_from_ns: int, t_to_ns: int
) -> float | None:
    """One rate signal over [t_from_ns, t_to_ns]: from counters when the server has them, else the
    time-averaged gauge it exports instead (SGLang's cache hit rate)."""
    rate = server_map.rates.get(signal)
    if rate is None:
        return None
    if rate.numerator:
        num = _summed_points(readings, rate.numerator)
        if len(num) >= 2:
            if rate.per_s:
                return counter_rate(num, t_from_ns, t_to_ns)
            return ratio_of_increases(num, _summed_points(readings, rate.denominator), t_from_ns, t_to_ns)
    if rate.gauge is not None:
        return gauge_mean(readings, signal, t_from_ns, t_to_ns)
    return None


def counter_total(
    server_map: ServerMap, readings: tuple[Reading, ...], signal: str, t_from_ns: int, t_to_ns: int
) -> float | None:
    """How much a per-second signal's counter grew over [t_from_ns, t_to_ns] (a level's preemptions: a
    rare event's rate rounds to 0/s), a restart counted from zero; None without two readings there."""
    rate = server_map.rates.get(signal)
    if rate is None or not rate.per_s or not rate.numerator:
        return None
    inside = in_window(_summed_points(readings, rate.numerator), t_from_ns, t_to_ns)
    return counter_increase([v for _, v in inside]) if len(inside) >= 2 else None


def window_histogram(
    readings: tuple[Reading, ...], signal: str, t_from_ns: int, t_to_ns: int
) -> Buckets | None:
    """The observations a server histogram gained over the readings inside the window."""
    inside = [
        r.histograms[signal] for r in readings if t_from_ns <= r.t_ns <= t_to_ns and signal in r.histograms
    ]
    return histogram_increase(inside)


def _quantiles(buckets: Buckets | None) -> dict[str, float | None]:
    """Live quantiles in seconds: a number only where its bucket is narrow (`parts.histogram_record`)."""
    record = histogram_record(buckets, scale=1.0)
    return {k: v for k, v in record.items() if k not in ("buckets", "source")}


def restarted(prev: Reading, cur: Reading) -> bool:
    """True when a counter or a histogram's count went down between two readings: the server restarted
    (its counters start again from zero), or its process start time changed."""
    if prev.started_s is not None and cur.started_s is not None and cur.started_s != prev.started_s:
        return True
    if any(cur.counters[n] < v for n, v in prev.counters.items() if n in cur.counters):
        return True
    return any(cur.histograms[n].count < b.count for n, b in prev.histograms.items() if n in cur.histograms)


def _window_hists(readings: tuple[Reading, ...], t_from_ns: int, t_to_ns: int) -> dict[str, Buckets | None]:
    signals = {s for r in readings for s in r.histograms}
    return {s: window_histogram(readings, s, t_from_ns, t_to_ns) for s in signals}


# --- the view -----------------------------------------------------------------------------------------------

STARTING, OK, MISSING, UNREACHABLE = "starting", "ok", "missing", "unreachable"


@dataclass(frozen=True)
class ServerView:
    """The server's own signals as last scraped; immutable, published whole by the poller.

    `current` holds each signal in `kinds.GAUGES` (latest reading) and `kinds.RATES` (over the last
    `window_s`); `quantiles` the server's latency histograms over the same window (`p50`, `p90`, `p99` in
    seconds, `count`, `mean`). None or absent: the server does not export it (or nothing happened yet)."""

    status: str = STARTING
    """`starting` (no scrape yet), `ok`, `missing` (404, not Prometheus text) or `unreachable`."""
    url: str = ""
    kind: str = UNKNOWN
    model: str | None = None
    message: str | None = None
    """The one line saying why there are no metrics, with the hint that fits the server."""
    window_s: float = 10.0
    scrapes: int = 0
    failures: int = 0
    current: Mapping[str, float | None] = field(default_factory=dict)
    quantiles: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    other_gauges: Mapping[str, float] = field(default_factory=dict)
    """An unrecognised server's gauges by name, latest reading."""
    readings: tuple[Reading, ...] = ()
    """The ring of recent readings, oldest first."""
    slots: Slots | None = None
    """llama.cpp only: its `/slots` as read beside the latest scrape (None elsewhere or when disabled)."""
    estimates: Mapping[str, Mapping[str, Estimate]] = field(default_factory=dict)
    """Each histogram's quantiles over the live window with their buckets (`window.Estimate`)."""
    parts: Mapping[str, Any] | None = None
    """The server's TTFT in parts over the live window (`parts.ttft_parts`), None without any part."""
    resets: int = 0
    """Times the server's counters went back (it restarted) since the first scrape."""
    reset_t_ns: int | None = None
    """When the last restart was seen (the first scrape after it)."""
    canary: CanaryFigures | None = None
    """The canary user's figures, set by the engine that runs one (None: no canary)."""
    late: int = 0
    """Scrapes that took longer than the poller's ``late_s`` (or timed out after the server had answered)."""
    late_at_ns: tuple[int, ...] = ()
    """When each of the recent late ones was (as many as the ring holds readings): a level counts its own."""
    stale_s: float | None = None
    """When the last scrape was late, how old its figures may be (how long it took; after a timeout, the
    age of the last reading); None when fresh."""

    @property
    def found(self) -> tuple[str, ...]:
        """The signals this server exports (in the latest reading)."""
        if not self.readings:
            return ()
        last = self.readings[-1]
        server_map = MAPS.get(self.kind)
        names = [g for g in last.gauges if "@" not in g] + list(last.histograms)  # not each GPU's
        if server_map is not None:
            names += [
                s
                for s, r in server_map.rates.items()
                if r.numerator and all(n in last.counters for n in r.numerator)
            ]
        return tuple(dict.fromkeys(names))

    def history(self, signal: str, last_s: float | None = None) -> tuple[Point, ...]:
        """A gauge signal's readings, or a rate signal per consecutive pair of readings, oldest first."""
        readings = self.readings
        if last_s is not None and readings:
            cutoff = readings[-1].t_ns - int(last_s * 1e9)
            readings = tuple(r for r in readings if r.t_ns >= cutoff)
        if signal in GAUGES:
            return tuple(_gauge_points(readings, signal))
        server_map = MAPS.get(self.kind)
        if server_map is None or signal not in RATES:
            return ()
        out: list[Point] = []
        for prev, cur in pairwise(readings):
            value = rate_signal(server_map, (prev, cur), signal, prev.t_ns, cur.t_ns)
            if value is not None:
                out.append((cur.t_ns, value))
        return tuple(out)

    def gauge_means(self, t_from_ns: int, t_to_ns: int) -> dict[str, float | None]:
        """Each gauge signal time-averaged over [t_from_ns, t_to_ns] (cheap: for a table row per level)."""
        return {s: gauge_mean(self.readings, s, t_from_ns, t_to_ns) for s in GAUGES}

    def level_energy(self, t_from_ns: int, t_to_ns: int) -> dict[str, float | None]:
        """The GPUs' ``energy_j`` and ``energy_s`` over a window (`gpu.energy_record` of the readings inside
        it), where the latest reading has GPU gauges and the energy counter, else nothing: the one reckoning
        of the results' level and the level table's row."""
        last = self.readings[-1].gauges if self.readings else {}
        if ENERGY not in last or not any(s in last for s in GPU_SIGNALS):
            return {}
        inside = tuple(r for r in around(self.readings, t_from_ns, t_to_ns) if t_from_ns <= r.t_ns <= t_to_ns)
        return energy_record(_gauge_points(inside, ENERGY))

    def table_figures(self, t_from_ns: int, t_to_ns: int) -> dict[str, float | None]:
        """`gauge_means`, the prefix-cache hit rate from the counters' increase over the window and the
        GPUs' energy (`level_energy`): a level table's row (the hit rate for a server that does not give
        ``cached_tokens`` per request), with ``late_scrapes`` when any."""
        figures = self.gauge_means(t_from_ns, t_to_ns)
        figures.update(self.level_energy(t_from_ns, t_to_ns))
        if late := self.late_in(t_from_ns, t_to_ns):
            figures["late_scrapes"] = float(late)
        server_map = MAPS.get(self.kind)
        figures["prefix_cache_hit_rate"] = (
            rate_signal(
                server_map,
                around(self.readings, t_from_ns, t_to_ns),
                "prefix_cache_hit_rate",
                t_from_ns,
                t_to_ns,
            )
            if server_map is not None
            else None
        )
        return figures

    def late_in(self, t_from_ns: int, t_to_ns: int) -> int:
        """The late scrapes within [t_from_ns, t_to_ns] (`late_at_ns`)."""
        return sum(1 for t in self.late_at_ns if t_from_ns <= t <= t_to_ns)

    def level_summary(self, t_from_ns: int, t_to_ns: int) -> dict[str, Any]:
        """The server's figures over one load level's window, for results: time-averaged gauges
        (`running_mean`, ...), rates, latency quantiles in ms, the server kind and what was found."""
        readings = around(self.readings, t_from_ns, t_to_ns)
        summary: dict[str, Any] = {
            "kind": self.kind,
            "model": self.model,
            "status": self.status,
            "found": list(self.found),
            "scrapes": sum(1 for r in readings if t_from_ns <= r.t_ns <= t_to_ns),
        }
        for signal in GAUGES:
            summary[f"{signal}_mean"] = gauge_mean(self.readings, signal, t_from_ns, t_to_ns)
        server_map = MAPS.get(self.kind)
        for signal in RATES:
            summary[signal] = (
                rate_signal(server_map, readings, signal, t_from_ns, t_to_ns) if server_map else None
            )
        summary["preemptions"] = (
            counter_total(server_map, readings, "preemptions_per_s", t_from_ns, t_to_ns)
            if server_map
            else None
        )
        hists = _window_hists(readings, t_from_ns, t_to_ns)
        for signal in HISTOGRAMS:
            summary[signal.removesuffix("_s") + "_ms"] = histogram_record(hists.get(signal))
        summary["ttft_parts"] = ttft_parts(hists)
        inside = [r for r in readings if t_from_ns <= r.t_ns <= t_to_ns]
        if summary["ttft_parts"] is not None and len(inside) >= 2:  # the scrapes its deltas lie between
            summary["ttft_parts"]["between_ns"] = (inside[0].t_ns, inside[-1].t_ns)
        last_gauges = self.readings[-1].gauges if self.readings else {}
        summary["gpu"] = gpu_record(lambda s: gauge_mean(self.readings, s, t_from_ns, t_to_ns), last_gauges)
        if summary["gpu"] is not None:
            summary["gpu"].update(self.level_energy(t_from_ns, t_to_ns))
        summary["restarts"] = sum(1 for prev, cur in pairwise(inside) if restarted(prev, cur))
        if late := self.late_in(t_from_ns, t_to_ns):  # only then: older files unchanged
            summary["late_scrapes"] = late
        return summary


def build_view(base: ServerView, readings: tuple[Reading, ...], families_model: str | None) -> ServerView:
    """A fresh `ok` view from the ring: current values over the last `base.window_s`."""
    last = readings[-1]
    t_to = last.t_ns
    t_from = t_to - int(base.window_s * 1e9)
    recent = around(readings, t_from, t_to)
    current: dict[str, float | None] = {s: last.gauges.get(s) for s in GAUGES}
    server_map = MAPS.get(base.kind)
    quantiles: dict[str, Mapping[str, float | None]] = {}
    found: dict[str, Mapping[str, Estimate]] = {}
    hists = _window_hists(recent, t_from, t_to)
    if server_map is not None:
        for signal in RATES:
            current[signal] = rate_signal(server_map, recent, signal, t_from, t_to)
        for signal in server_map.histograms:
            quantiles[signal] = _quantiles(hists.get(signal))
            found[signal] = estimates(hists.get(signal))
    return ServerView(
        status=OK,
        url=base.url,
        kind=base.kind,
        model=families_model or base.model,
        message=None,
        window_s=base.window_s,
        scrapes=base.scrapes + 1,
        failures=base.failures,
        current=MappingProxyType(current),
        quantiles=MappingProxyType(quantiles),
        other_gauges=last.other_gauges,
        readings=readings,
        estimates=MappingProxyType(found),
        parts=ttft_parts(hists) if server_map is not None else None,
        resets=base.resets,
        reset_t_ns=base.reset_t_ns,
        late=base.late,
        late_at_ns=base.late_at_ns,
    )
