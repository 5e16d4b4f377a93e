"""The costly views of the aggregates (every level's `LevelView`, the TTFT/ITL histograms), computed by one
thread and published as one immutable `Views` bundle that snapshots only read.

Why a bundle: the level views and histograms take up to ~20 ms with numpy; a face's snapshot, called on its
UI thread at 10 Hz, must not pay that. The handle's reader thread recomputes them every `heavy_interval_s`
(see `ViewMaker.refresh`) and swaps in a new bundle; a snapshot takes whatever bundle is current.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.engine.aggregate import metrics as m
from tui.engine.aggregate.level_arrivals import measure_level
from tui.engine.aggregate.levels import LevelAgg, LevelContext
from tui.engine.aggregate.outages import without_outages
from tui.engine.aggregate.series import MetricSeries
from tui.engine.snapshot import WINDOWS_S, Histogram, ItlConvention, Knee, LevelView, Outage

LevelEntry = tuple[LevelView, dict[str, Any]]
"""A level's view and the extra figures the results JSON wants."""
TtftHistograms = dict[float | None, Histogram]
ItlHistograms = dict[tuple[ItlConvention, float | None], Histogram]

ITL_SERIES: tuple[tuple[ItlConvention, str], ...] = (
    ("chunk", "itl_chunk"),
    ("tpot", "tpot"),
    ("e2e", "itl_e2e"),
)
"""Each ITL convention and the metric series it reads."""


@dataclass(frozen=True)
class Views:
    """One published set of the costly views. Immutable: a reader holds it without a lock."""

    level_views: tuple[LevelEntry, ...] = ()
    knee: Knee | None = None
    ttft_hist: TtftHistograms = field(default_factory=dict)
    itl_hist: ItlHistograms = field(default_factory=dict)
    e2e_hist: Histogram = field(default_factory=Histogram)
    """E2E over the whole run."""
    levels_ns: float = -math.inf
    """When the level views (and knee) were computed."""
    histograms_ns: float = -math.inf
    """When the histograms were computed."""
    generation: int = -1
    """The `ViewMaker.generation` the level views were computed at."""

    @property
    def levels(self) -> tuple[LevelView, ...]:
        """The level views alone."""
        return tuple(v for v, _ in self.level_views)


@dataclass(frozen=True)
class ViewInputs:
    """What the level views depend on beyond the levels' own aggregates."""

    t0_ns: int
    in_flight_sent: Mapping[int, Sequence[int]]
    """Send stamps of the in-flight requests, per level."""
    worker_t_ns: Sequence[int]
    """Each worker's latest batch time (no unreported data before the minimum)."""
    worker_level: Sequence[int]
    """The level each worker has applied."""
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    slo_e2e_ms: float | None = None
    outages: tuple[Outage, ...] = ()
    """When the server did not answer: taken out of the levels' rates (`without_outages`)."""
    outages_version: int = 0


class ViewMaker:
    """Computes and publishes `Views`; owned by one thread at a time (the caller serialises).

    Level views are recomputed when older than ``interval_s`` or when the levels changed shape (`invalidate`:
    a level began or ended), and then only the levels whose data changed or whose window is still open;
    histograms when older than ``interval_s``."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.views = Views()
        """The latest published bundle."""
        self._cache: dict[int, LevelEntry] = {}
        self._cache_keys: dict[int, tuple[int, int, int]] = {}
        self.generation = 0
        """Bumped by `invalidate`; the level views are current once published at this generation."""

    def invalidate(self) -> None:
        """The set of levels or a level's end changed: recompute the level views at the next refresh."""
        self.generation += 1

    def refresh(
        self,
        now_ns: int,
        levels: Mapping[int, LevelAgg],
        series: Mapping[str, MetricSeries],
        inputs: ViewInputs,
        *,
        force: bool = False,
    ) -> Views:
        """Recompute what is due (everything with ``force``), publish a new bundle if anything was, and
        return the current one."""
        old = self.views
        generation = self.generation
        due_levels = self._levels_due(now_ns, force=force)
        due_hist = self._hist_due(now_ns, force=force)
        if not (due_levels or due_hist):
            return old
        level_views, knee, levels_ns = old.level_views, old.knee, old.levels_ns
        if due_levels:
            level_views = self._level_views(now_ns, levels, inputs)
            knee = m.find_knee(tuple(v for v, _ in level_views))
            levels_ns = now_ns
        ttft, itl, e2e, hist_ns = old.ttft_hist, old.itl_hist, old.e2e_hist, old.histograms_ns
        if due_hist:
            ttft, itl = histograms(series, now_ns)
            e2e = series["e2e"].histogram(now_ns, None)
            hist_ns = now_ns
        self.views = Views(
            level_views,
            knee,
            ttft,
            itl,
            e2e,
            levels_ns,
            hist_ns,
            generation if due_levels else old.generation,
        )
        return self.views

    def due(self, now_ns: int, *, force: bool = False) -> bool:
        """`refresh` would recompute something now (so it reads the levels and series)."""
        return self._levels_due(now_ns, force=force) or self._hist_due(now_ns, force=force)

    def _levels_due(self, now_ns: int, *, force: bool) -> bool:
        old = self.views
        return (
            force
            or old.generation != self.generation
            or not old.level_views
            or self._old(old.levels_ns, now_ns)
        )

    def _hist_due(self, now_ns: int, *, force: bool) -> bool:
        old = self.views
        return force or not old.ttft_hist or self._old(old.histograms_ns, now_ns)

    def _old(self, computed_ns: float, now_ns: int) -> bool:
        return now_ns - computed_ns >= self.interval_s * 1e9

    def _level_views(
        self, now_ns: int, levels: Mapping[int, LevelAgg], inputs: ViewInputs
    ) -> tuple[LevelEntry, ...]:
        horizon = min(inputs.worker_t_ns) if inputs.worker_t_ns else now_ns
        horizon = min(max(horizon, 0), now_ns)
        out = []
        earlier_in_flight = 0
        earlier_last_end: int | None = None
        for level_id, lv in levels.items():
            mine = inputs.in_flight_sent.get(level_id, ())
            settled = lv.end_ns is not None and not mine and horizon >= lv.end_ns and earlier_in_flight == 0
            ctx = LevelContext(
                now_ns=now_ns,
                horizon_ns=horizon,
                in_flight=len(mine),
                oldest_in_flight_ns=min(mine) if mine else None,
                earlier_in_flight=earlier_in_flight,
                earlier_last_end_ns=earlier_last_end,
                acked=all(lvl >= level_id for lvl in inputs.worker_level),
                settled=settled,
            )
            key = (lv.version, 1 if settled else 0, inputs.outages_version)
            cached = self._cache.get(level_id)
            if cached is None or not settled or self._cache_keys.get(level_id) != key:
                view, extra = measure_level(
                    lv, ctx, inputs.t0_ns, inputs.slo_ttft_ms, inputs.slo_tpot_ms, inputs.slo_e2e_ms
                )
                now_s = (now_ns - inputs.t0_ns) / 1e9
                cached = (without_outages(view, inputs.outages, now_s), extra)
                self._cache[level_id] = cached
                self._cache_keys[level_id] = key
            out.append(cached)
            earlier_in_flight += len(mine)
            if lv.last_end_ns is not None:
                earlier_last_end = max(earlier_last_end or 0, lv.last_end_ns)
        return tuple(out)


def histograms(series: Mapping[str, MetricSeries], now_ns: int) -> tuple[TtftHistograms, ItlHistograms]:
    """TTFT and ITL (every convention) histograms per rolling window."""
    ttft = {w: series["ttft"].histogram(now_ns, w) for w in WINDOWS_S}
    itl: ItlHistograms = {}
    for conv, name in ITL_SERIES:
        for w in WINDOWS_S:
            itl[(conv, w)] = series[name].histogram(now_ns, w)
    return ttft, itl
