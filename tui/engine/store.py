"""Bounded aggregation of what the engine workers report, and `Snapshot`s computed from it on demand.

Memory stays flat however long the run (the full data goes to the requests log, not here):

- rolling windows (10/30/60 s, whole run) per metric: a ring of the last `SERIES_CAP` raw samples (exact
  stats whenever it still holds the whole window), a 64-slot ring of per-second fine histograms with
  running moments (used once the raw ring no longer covers the window), and a whole-run fine histogram;
- per load level: exact per-request rows and chunk gaps up to `LEVEL_REQUEST_CAP`/`LEVEL_GAP_CAP`, then a
  uniform reservoir sample of that size (stats become estimates; counts and throughput stay exact, as they
  come from a per-level timeline of at most 4096 buckets whose width doubles as the level grows);
- the most recent `RECENT_CAP` finished records (for `detail()`), lane text capped per request.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tui.engine import metrics as m
from tui.engine.config import LoadTarget
from tui.engine.records import RequestRecord
from tui.engine.snapshot import (
    WINDOWS_S,
    ClientHealth,
    Histogram,
    ItlConvention,
    LaneState,
    LaneView,
    LevelView,
    RequestDetail,
    Snapshot,
    Stats,
)

SERIES_CAP = 1 << 17
"""Raw samples kept per rolling metric (about 2 MB each)."""
RING_SLOTS = 64
"""Seconds of per-second histograms: covers the longest rolling window (60 s)."""
LEVEL_REQUEST_CAP = 20_000
LEVEL_GAP_CAP = 200_000
RECENT_CAP = 2_000
TEXT_CAP = 32_768
"""Characters of generated text kept per request (the tail)."""
TEXT_TAIL = 300
LIVE_WINDOW_S = 5.0
"""The live gauges (output tokens/s, requests/s) average over this many seconds."""
LIVE_BUCKET_NS = 100_000_000
LIVE_BUCKETS = 600
LANE_LINGER_S = 1.5
"""A finished request's lane stays visible this long (so a face can flash ok/error)."""
RECENT_ERRORS = 8
MIN_STEADY_REQUESTS = 5
"""A steady window is trusted once this many requests ended in it and it is at least one median E2E
(and one second) long."""
FATAL_AFTER = 3
"""If the first this-many finished requests all fail to connect or get a non-429 4xx, the target is
unusable: `Snapshot.fatal` is set."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# --- rolling metric series ----------------------------------------------------------------------


class MetricSeries:
    """One latency metric over time: exact recent samples plus bounded histograms (see module doc)."""

    def __init__(self, t0_ns: int, cap: int | None = None) -> None:
        self.t0_ns = t0_ns
        self.cap = cap = cap or SERIES_CAP
        self.t = np.zeros(cap, dtype=np.int64)
        self.v = np.zeros(cap, dtype=np.float64)
        self.count = 0
        """Samples ever added."""
        self.evicted_max_t = -(1 << 62)
        """Latest timestamp among samples pushed out of the raw ring."""
        self.slot_sec = np.full(RING_SLOTS, -1, dtype=np.int64)
        self.slot_hist = np.zeros((RING_SLOTS, m.N_FINE), dtype=np.int64)
        self.slot_moments = [m.Moments() for _ in range(RING_SLOTS)]
        self.max_sec = -1
        self.all_hist = np.zeros(m.N_FINE, dtype=np.int64)
        self.all_moments = m.Moments()
        self.version = 0

    def add(self, t_ns: IntArray, values: FloatArray) -> None:
        """Add samples stamped ``t_ns`` (NaNs dropped)."""
        keep = ~np.isnan(values)
        if not keep.all():
            t_ns, values = t_ns[keep], values[keep]
        k = int(values.size)
        if k == 0:
            return
        self.version += 1
        # raw ring
        if k >= self.cap:
            t_ns, values = t_ns[-self.cap :], values[-self.cap :]
            k = self.cap
        start = self.count % self.cap
        idx = (start + np.arange(k)) % self.cap
        if self.count + k > self.cap:
            n_old = min(self.cap, self.count)
            overwritten = idx[idx < n_old] if self.count < self.cap else idx
            if overwritten.size:
                self.evicted_max_t = max(self.evicted_max_t, int(self.t[overwritten].max()))
        self.t[idx] = t_ns
        self.v[idx] = values
        self.count += k
        # whole run
        bins = m.fine_bins(values)
        self.all_hist += np.bincount(bins, minlength=m.N_FINE)
        self.all_moments.add(values)
        # per-second ring
        secs = (t_ns - self.t0_ns) // 1_000_000_000
        self.max_sec = max(self.max_sec, int(secs.max()))
        lo = self.max_sec - RING_SLOTS + 1
        for s in np.unique(secs[secs >= lo]).tolist():
            slot = s % RING_SLOTS
            if self.slot_sec[slot] != s:
                self.slot_sec[slot] = s
                self.slot_hist[slot] = 0
                self.slot_moments[slot] = m.Moments()
            sel = secs == s
            self.slot_hist[slot] += np.bincount(bins[sel], minlength=m.N_FINE)
            self.slot_moments[slot].add(values[sel])

    def histogram(self, now_ns: int, window_s: float | None) -> Histogram:
        """Display histogram and stats of the samples stamped within the last ``window_s`` (None: all)."""
        edges = tuple(float(e) for e in m.DISPLAY_EDGES_MS)
        if self.count == 0:
            return Histogram(edges, (0,) * m.N_DISPLAY, Stats())
        since = -(1 << 62) if window_s is None else now_ns - int(window_s * 1e9)
        n = min(self.count, self.cap)
        if self.evicted_max_t < since or self.count <= self.cap:
            t, v = self.t[:n], self.v[:n]
            if window_s is not None:
                v = v[t >= since]
            return Histogram(edges, tuple(m.display_counts(v).tolist()), m.stats(v))
        # The raw ring no longer holds the whole window: fall back to histograms.
        if window_s is None:
            fine, mom = self.all_hist, self.all_moments
        else:
            # whole seconds overlapping the window (so up to one second more than asked)
            now_sec = (now_ns - self.t0_ns) // 1_000_000_000
            first = (since - self.t0_ns) // 1_000_000_000
            sel = (self.slot_sec >= first) & (self.slot_sec <= now_sec)
            fine = self.slot_hist[sel].sum(axis=0)
            mom = m.Moments()
            for i in np.flatnonzero(sel).tolist():
                mom.merge(self.slot_moments[i])
        return Histogram(
            edges, tuple(m.display_counts_from_fine(fine).tolist()), m.stats_from_fine(fine, mom)
        )


# --- per-level aggregation -----------------------------------------------------------------------


class Reservoir:
    """Columns of rows, exact up to ``cap`` rows, then a uniform random sample of ``cap`` (Algorithm R)."""

    def __init__(self, cap: int, columns: dict[str, Any], seed: int = 0) -> None:
        self.cap = cap
        self.cols = {name: np.zeros(cap, dtype=dt) for name, dt in columns.items()}
        self.seen = 0
        self.rng = np.random.default_rng(seed)

    @property
    def size(self) -> int:
        return min(self.seen, self.cap)

    @property
    def exact(self) -> bool:
        return self.seen <= self.cap

    def add(self, rows: dict[str, npt.NDArray[Any]]) -> None:
        k = len(next(iter(rows.values())))
        if k == 0:
            return
        free = max(0, self.cap - self.seen)
        direct = min(free, k)
        if direct:
            for name, arr in rows.items():
                self.cols[name][self.seen : self.seen + direct] = arr[:direct]
        if k > direct:
            # Row i (0-based overall) replaces a random slot with probability cap/(i+1).
            overall = self.seen + direct + np.arange(k - direct)
            slots = (self.rng.random(k - direct) * (overall + 1)).astype(np.int64)
            hit = slots < self.cap
            for name, arr in rows.items():
                self.cols[name][slots[hit]] = arr[direct:][hit]
        self.seen += k

    def view(self) -> dict[str, npt.NDArray[Any]]:
        n = self.size
        return {name: col[:n] for name, col in self.cols.items()}


class Timeline:
    """Per-level counters by time: fixed bucket count; the bucket width doubles when the level outgrows it."""

    TOK, END_OK, END_GOOD, SENT_OK, SENT_FAIL, SENT_IN, SENT_OUT = range(7)
    CHANNELS = 7

    def __init__(self, start_ns: int, res_ns: int = 100_000_000, buckets: int = 4096) -> None:
        self.start_ns = start_ns
        self.res_ns = res_ns
        self.n = buckets
        self.b = np.zeros((self.CHANNELS, buckets), dtype=np.float64)

    def add(self, channel: int, t_ns: IntArray, weights: FloatArray | None = None) -> None:
        if t_ns.size == 0:
            return
        idx = np.maximum((t_ns - self.start_ns) // self.res_ns, 0)
        top = int(idx.max())
        while top >= self.n:
            self.b = self.b.reshape(self.CHANNELS, self.n // 2, 2).sum(axis=2)
            self.b = np.concatenate([self.b, np.zeros_like(self.b)], axis=1)
            self.res_ns *= 2
            idx //= 2
            top //= 2
        self.b[channel] += np.bincount(idx, weights=weights, minlength=self.n)[: self.n]

    def align(self, from_ns: int, to_ns: int) -> tuple[int, int]:
        """Bucket range [b0, b1) inside [from_ns, to_ns] (rounded inward)."""
        b0 = max(0, -((self.start_ns - from_ns) // self.res_ns))  # ceil
        b1 = min(self.n, (to_ns - self.start_ns) // self.res_ns)
        return int(b0), int(max(b0, b1))

    def edge_ns(self, b: int) -> int:
        return self.start_ns + b * self.res_ns

    def total(self, channel: int, b0: int, b1: int | None = None) -> float:
        return float(self.b[channel, b0:b1].sum())


_REQ_COLUMNS: dict[str, Any] = {
    "sent_ns": np.int64,
    "end_ns": np.int64,
    "ttft_ms": np.float64,
    "e2e_ms": np.float64,
    "tpot_ms": np.float64,
    "itl_e2e_ms": np.float64,
    "tpc": np.float64,
    "decode_tps": np.float64,
    "sched_lag_ms": np.float64,
}
_GAP_COLUMNS: dict[str, Any] = {"sent_ns": np.int64, "gap_ms": np.float64}


@dataclass
class LevelAgg:
    """Everything kept about one load level."""

    level_id: int
    target: LoadTarget
    start_ns: int
    end_ns: int | None = None
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    last_end_ns: int | None = None
    errors: Counter[str] = field(default_factory=Counter)
    max_lag_ms: float = 0.0
    max_cpu: float = 0.0
    version: int = 0
    req: Reservoir = field(init=False)
    gaps: Reservoir = field(init=False)
    timeline: Timeline = field(init=False)

    def __post_init__(self) -> None:
        self.req = Reservoir(LEVEL_REQUEST_CAP, _REQ_COLUMNS, seed=self.level_id)
        self.gaps = Reservoir(LEVEL_GAP_CAP, _GAP_COLUMNS, seed=self.level_id + 1)
        self.timeline = Timeline(self.start_ns)


@dataclass(frozen=True)
class LevelContext:
    """What a level's steady window depends on beyond the level's own data."""

    now_ns: int
    horizon_ns: int
    """No unreported data before this: min over workers of their last batch time."""
    in_flight: int
    oldest_in_flight_ns: int | None
    earlier_in_flight: int
    earlier_last_end_ns: int | None
    acked: bool
    """Every worker has applied this level (so requests of earlier levels are all known)."""


def level_view(
    lv: LevelAgg, ctx: LevelContext, t0_ns: int, slo_ttft_ms: float | None, slo_tpot_ms: float | None
) -> tuple[LevelView, dict[str, Any]]:
    """The summary of one level, plus the extra figures the results JSON wants."""
    rows = lv.req.view()
    ok_e2e = rows["e2e_ms"]
    median_e2e_ns = float(np.median(ok_e2e)) * 1e6 if ok_e2e.size else None
    steady_from = m.steady_from_ns(
        lv.start_ns,
        median_e2e_ns,
        ctx.earlier_in_flight if ctx.acked else max(1, ctx.earlier_in_flight),
        ctx.earlier_last_end_ns,
    )
    end = ctx.now_ns if lv.end_ns is None else lv.end_ns
    win_end = min(end, ctx.horizon_ns)
    if ctx.oldest_in_flight_ns is not None:
        win_end = min(win_end, ctx.oldest_in_flight_ns)
    win_start = steady_from if steady_from is not None and steady_from < win_end else lv.start_ns
    tl = lv.timeline
    b0, b1 = tl.align(win_start, win_end)
    a_from, a_to = tl.edge_ns(b0), tl.edge_ns(b1)
    duration_s = (a_to - a_from) / 1e9
    in_window = steady_from is not None and steady_from < win_end
    # population: requests sent from the (aligned) window start on
    sel = rows["sent_ns"] >= a_from
    gap_rows = lv.gaps.view()
    gaps = gap_rows["gap_ms"][gap_rows["sent_ns"] >= a_from]
    pick = {k: v[sel] for k, v in rows.items()}
    tokens = tl.total(Timeline.TOK, b0, b1)
    ended_ok = tl.total(Timeline.END_OK, b0, b1)
    ended_good = tl.total(Timeline.END_GOOD, b0, b1)
    sent_in_window_in = tl.total(Timeline.SENT_IN, b0, b1)
    completed = round(tl.total(Timeline.SENT_OK, b0))
    failed = round(tl.total(Timeline.SENT_FAIL, b0))
    in_tokens = round(tl.total(Timeline.SENT_IN, b0))
    out_tokens = round(tl.total(Timeline.SENT_OUT, b0))
    per_s = (lambda x: x / duration_s) if duration_s > 0 else (lambda x: float("nan"))
    steady = bool(
        in_window and ended_ok >= MIN_STEADY_REQUESTS and duration_s >= max(1.0, (median_e2e_ns or 0.0) / 1e9)
    )
    decode = pick["decode_tps"]
    decode = decode[~np.isnan(decode)]
    tpc = pick["tpc"]
    tpc = tpc[~np.isnan(tpc)]
    goodput = per_s(ended_good) if (slo_ttft_ms is not None or slo_tpot_ms is not None) else None
    view = LevelView(
        level_id=lv.level_id,
        mode=lv.target.mode,
        value=lv.target.value,
        started_s=(lv.start_ns - t0_ns) / 1e9,
        ended_s=None if lv.end_ns is None else (lv.end_ns - t0_ns) / 1e9,
        steady_from_s=None if steady_from is None else (steady_from - t0_ns) / 1e9,
        steady=steady,
        completed=lv.completed,
        failed=lv.failed,
        output_tps=per_s(tokens),
        request_per_s=per_s(ended_ok),
        per_request_tps=float(np.median(decode)) if decode.size else float("nan"),
        ttft=m.stats(pick["ttft_ms"]),
        tpot=m.stats(pick["tpot_ms"]),
        itl_chunk=m.stats(gaps),
        itl_e2e=m.stats(pick["itl_e2e_ms"]),
        e2el=m.stats(pick["e2e_ms"]),
        tokens_per_chunk=float(tpc.mean()) if tpc.size else float("nan"),
        sched_lag=m.stats(pick["sched_lag_ms"]),
        errors=tuple(sorted(lv.errors.items())),
        window_s=duration_s,
        window_from_s=(a_from - t0_ns) / 1e9,
        window_to_s=(a_to - t0_ns) / 1e9,
        window_completed=completed,
        window_failed=failed,
        input_tokens=in_tokens,
        output_tokens=out_tokens,
        total_tps=per_s(tokens + sent_in_window_in),
        goodput_per_s=goodput,
        in_flight=ctx.in_flight,
        exact=lv.req.exact and lv.gaps.exact,
    )
    extra = {"max_loop_lag_p99_ms": lv.max_lag_ms, "max_cpu_share": lv.max_cpu, "cancelled": lv.cancelled}
    return view, extra


# --- lanes --------------------------------------------------------------------------------------


@dataclass
class Lane:
    """The face's view of one request's token stream (text capped to its tail)."""

    request_id: int
    level_id: int
    sent_ns: int
    parts: list[str] = field(default_factory=list)
    chars: int = 0
    tokens: int = 0
    first_content_ns: int | None = None
    state: LaneState = "waiting"
    end_ns: int | None = None
    error: str | None = None

    def append(self, text: str) -> None:
        if not text:
            return
        self.parts.append(text)
        self.chars += len(text)
        if self.chars > 2 * TEXT_CAP:
            joined = "".join(self.parts)[-TEXT_CAP:]
            self.parts = [joined]
            self.chars = len(joined)

    def text(self) -> str:
        return "".join(self.parts)[-TEXT_CAP:]

    def tail(self, n: int = TEXT_TAIL) -> str:
        out: list[str] = []
        got = 0
        for part in reversed(self.parts):
            out.append(part)
            got += len(part)
            if got >= n:
                break
        return "".join(reversed(out))[-n:]


# --- the store ----------------------------------------------------------------------------------


class Store:
    """Drains worker batches into bounded aggregates; computes snapshots, level views and details.

    Not thread-safe: the handle serialises access with a lock.
    """

    def __init__(
        self,
        t0_ns: int,
        workers: int,
        *,
        slo_ttft_ms: float | None = None,
        slo_tpot_ms: float | None = None,
        lag_threshold_ms: float = 2.0,
        cpu_threshold: float = 0.6,
        max_lanes: int = 64,
        heavy_interval_s: float = 0.5,
    ) -> None:
        self.t0_ns = t0_ns
        self.workers = workers
        self.slo_ttft_ms = slo_ttft_ms
        self.slo_tpot_ms = slo_tpot_ms
        self.lag_threshold_ms = lag_threshold_ms
        self.cpu_threshold = cpu_threshold
        self.max_lanes = max_lanes
        self.heavy_interval_s = heavy_interval_s
        self.series: dict[str, MetricSeries] = {
            name: MetricSeries(t0_ns) for name in ("ttft", "e2e", "tpot", "itl_e2e", "itl_chunk")
        }
        self.levels: dict[int, LevelAgg] = {}
        self.lanes: dict[int, Lane] = {}
        self.finished: OrderedDict[int, Lane] = OrderedDict()
        self.recent: OrderedDict[int, RequestRecord] = OrderedDict()
        self.completed = 0
        self.failed = 0
        self.cancelled = 0
        self.errors: Counter[str] = Counter()
        self.recent_errors: deque[str] = deque(maxlen=RECENT_ERRORS)
        self.notices: list[str] = []
        self.fatal: str | None = None
        self._early: list[RequestRecord] = []
        """Finished records before the first success (to tell an unusable target)."""
        self._any_ok = False
        self.worker_t = [0] * workers
        self.worker_level = [0] * workers
        self.worker_in_flight = [0] * workers
        self.worker_health: list[tuple[float, float]] = [(0.0, 0.0)] * workers
        self.max_lag_ms = 0.0
        self.max_cpu = 0.0
        self.live_tokens = np.zeros(LIVE_BUCKETS, dtype=np.float64)
        self.live_ends = np.zeros(LIVE_BUCKETS, dtype=np.float64)
        self.live_slot_id = np.full(LIVE_BUCKETS, -1, dtype=np.int64)
        self.counted_tokens = 0.0
        self.usage_tokens = 0.0
        self.seq = 0
        self._heavy_at = -math.inf
        self._heavy: tuple[
            dict[float | None, Histogram], dict[tuple[ItlConvention, float | None], Histogram]
        ] = (
            {},
            {},
        )
        self._views: dict[int, tuple[LevelView, dict[str, Any]]] = {}
        self._view_keys: dict[int, tuple[int, int]] = {}
        self._views_at = -math.inf

    # --- levels -------------------------------------------------------------------------------

    def begin_level(self, level_id: int, target: LoadTarget, t_ns: int) -> None:
        """A new load level starts now (and the previous one ends)."""
        self.end_level(t_ns)
        self.levels[level_id] = LevelAgg(level_id, target, t_ns)
        self._views_at = -math.inf

    def end_level(self, t_ns: int) -> None:
        for lv in self.levels.values():
            if lv.end_ns is None:
                lv.end_ns = t_ns
                lv.version += 1
        self._views_at = -math.inf

    @property
    def current_level(self) -> LevelAgg | None:
        return next(reversed(self.levels.values()), None) if self.levels else None

    # --- ingest -------------------------------------------------------------------------------

    def ingest(self, batch: dict[str, Any]) -> list[RequestRecord]:
        """Fold one worker batch in; return the records that finished in it (for the requests log)."""
        w = batch["w"]
        t_ns = batch["t"]
        self.worker_t[w] = max(self.worker_t[w], t_ns)
        self.worker_level[w] = batch.get("level", self.worker_level[w])
        self.worker_in_flight[w] = batch.get("in_flight", 0)
        health = batch.get("health")
        if health is not None:
            lag, cpu = health
            self.worker_health[w] = (lag, cpu)
            self.max_lag_ms = max(self.max_lag_ms, lag)
            self.max_cpu = max(self.max_cpu, cpu)
            cur = self.current_level
            if cur is not None:
                cur.max_lag_ms = max(cur.max_lag_ms, lag)
                cur.max_cpu = max(cur.max_cpu, cpu)
        for notice in batch.get("notices", ()):
            if notice not in self.notices:
                self.notices.append(notice)
                self.recent_errors.append(notice)
        for rid, level_id, sent_ns, text, tokens, first_ns in batch.get("lanes", ()):
            lane = self.lanes.get(rid)
            if lane is None:
                if rid in self.finished:
                    continue
                lane = self.lanes[rid] = Lane(rid, level_id, sent_ns)
            lane.append(text)
            lane.tokens = tokens
            if first_ns is not None:
                lane.first_content_ns = first_ns
                lane.state = "streaming"
        tokens = batch.get("tokens", 0)
        if tokens:
            self._live_add(self.live_tokens, t_ns, tokens)
        records = [RequestRecord.from_wire(t) for t in batch.get("records", ())]
        if records:
            self._finish(records)
        return records

    def _live_add(self, ring: FloatArray, t_ns: int, value: float) -> None:
        b = (t_ns - self.t0_ns) // LIVE_BUCKET_NS
        slot = b % LIVE_BUCKETS
        if self.live_slot_id[slot] != b:
            self.live_slot_id[slot] = b
            self.live_tokens[slot] = 0.0
            self.live_ends[slot] = 0.0
        ring[slot] += value

    def _finish(self, records: Sequence[RequestRecord]) -> None:
        ok_recs: list[RequestRecord] = []
        for rec in records:
            lane = self.lanes.pop(rec.request_id, None) or Lane(rec.request_id, rec.level_id, rec.sent_ns)
            lane.state = rec.status if rec.status != "ok" else "ok"
            lane.end_ns = rec.end_ns
            lane.error = rec.error
            lane.tokens = rec.output_tokens or lane.tokens
            lane.first_content_ns = rec.first_content_ns
            self.finished[rec.request_id] = lane
            if len(self.finished) > 256:
                self.finished.popitem(last=False)
            self.recent[rec.request_id] = rec
            if len(self.recent) > RECENT_CAP:
                self.recent.popitem(last=False)
            lv = self.levels.get(rec.level_id)
            if lv is not None:
                lv.version += 1
                lv.last_end_ns = max(lv.last_end_ns or 0, rec.end_ns)
            if rec.status == "ok":
                self.completed += 1
                self._any_ok = True
                ok_recs.append(rec)
                self._live_add(self.live_ends, rec.end_ns, 1.0)
                counted = float(sum(rec.chunk_tokens)) if rec.chunk_tokens is not None else len(rec.chunk_ns)
                if rec.output_source == "usage" and rec.output_tokens is not None:
                    self.counted_tokens += counted
                    self.usage_tokens += rec.output_tokens
                if lv is not None:
                    lv.completed += 1
            elif rec.status == "cancelled":
                self.cancelled += 1
                if lv is not None:
                    lv.cancelled += 1
            else:
                self.failed += 1
                klass = rec.error_class or "client"
                self.errors[klass] += 1
                self.recent_errors.append(f"#{rec.request_id} {klass}: {rec.error}")
                if lv is not None:
                    lv.failed += 1
                    lv.errors[klass] += 1
                    lv.timeline.add(Timeline.SENT_FAIL, np.array([rec.sent_ns], dtype=np.int64))
            if not self._any_ok and rec.status == "error":
                self._early.append(rec)
                self._check_fatal()
        if ok_recs:
            self._add_ok(ok_recs)

    def _check_fatal(self) -> None:
        if self.fatal is not None or len(self._early) < FATAL_AFTER:
            return
        unusable = all(
            r.error_class == "connect" or (r.error_class == "http_4xx" and r.http_status != 429)
            for r in self._early
        )
        if unusable:
            last = self._early[-1]
            self.fatal = f"every request fails: {last.error}"

    def _add_ok(self, recs: Sequence[RequestRecord]) -> None:
        n = len(recs)
        sent = np.fromiter((r.sent_ns for r in recs), dtype=np.int64, count=n)
        first = np.fromiter(
            (r.first_content_ns if r.first_content_ns is not None else np.nan for r in recs),
            dtype=np.float64,
            count=n,
        )
        end = np.fromiter((r.end_ns for r in recs), dtype=np.int64, count=n)
        osl = np.fromiter((r.output_tokens or 0 for r in recs), dtype=np.float64, count=n)
        isl = np.fromiter((r.input_tokens or 0 for r in recs), dtype=np.float64, count=n)
        nch = np.fromiter((len(r.chunk_ns) for r in recs), dtype=np.float64, count=n)
        sched = np.fromiter(
            ((r.sent_ns - r.scheduled_ns) / 1e6 if r.scheduled_ns is not None else np.nan for r in recs),
            dtype=np.float64,
            count=n,
        )
        levels = np.fromiter((r.level_id for r in recs), dtype=np.int64, count=n)
        fig = m.request_figures(sent, first, end, osl, nch)
        good = m.good_mask(fig.ttft_ms, fig.tpot_ms, self.slo_ttft_ms, self.slo_tpot_ms)
        # Every request's chunk stamps in one array; gaps are diffs within a request (vectorised: no numpy
        # call per request on this path, which runs for every finished request).
        lens = nch.astype(np.int64)
        ct = np.frombuffer(b"".join(r.chunk_ns.tobytes() for r in recs), dtype=np.int64)
        owner = np.repeat(np.arange(n), lens)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_chunk = np.where((lens > 0) & (osl > 0), osl / lens, 1.0)
        cw = per_chunk[owner]
        for i, r in enumerate(recs):
            if r.chunk_tokens is not None and len(r.chunk_tokens) == len(r.chunk_ns):
                lo = int(lens[:i].sum())
                cw[lo : lo + lens[i]] = np.frombuffer(r.chunk_tokens, dtype=np.int64)
        cl = levels[owner]
        same = owner[1:] == owner[:-1]
        gaps = (np.diff(ct)[same]).astype(np.float64) / 1e6
        gap_owner = owner[1:][same]
        gt = ct[1:][same]
        gs = sent[gap_owner]
        first_t = np.where(np.isnan(first), end, np.nan_to_num(first)).astype(np.int64)
        self.series["ttft"].add(first_t, fig.ttft_ms)
        self.series["e2e"].add(end, fig.e2e_ms)
        self.series["tpot"].add(end, fig.tpot_ms)
        self.series["itl_e2e"].add(end, fig.itl_e2e_ms)
        self.series["itl_chunk"].add(gt, gaps)
        gap_level = levels[gap_owner]
        for level_id in np.unique(levels).tolist():
            lv = self.levels.get(level_id)
            if lv is None:
                continue
            s = levels == level_id
            lv.req.add(
                {
                    "sent_ns": sent[s],
                    "end_ns": end[s],
                    "ttft_ms": fig.ttft_ms[s],
                    "e2e_ms": fig.e2e_ms[s],
                    "tpot_ms": fig.tpot_ms[s],
                    "itl_e2e_ms": fig.itl_e2e_ms[s],
                    "tpc": fig.tokens_per_chunk[s],
                    "decode_tps": fig.decode_tps[s],
                    "sched_lag_ms": sched[s],
                }
            )
            gsel = gap_level == level_id
            lv.gaps.add({"sent_ns": gs[gsel], "gap_ms": gaps[gsel]})
            tl = lv.timeline
            csel = cl == level_id
            tl.add(Timeline.TOK, ct[csel], cw[csel])
            tl.add(Timeline.END_OK, end[s])
            tl.add(Timeline.END_GOOD, end[s & good])
            tl.add(Timeline.SENT_OK, sent[s])
            tl.add(Timeline.SENT_IN, sent[s], isl[s])
            tl.add(Timeline.SENT_OUT, sent[s], osl[s])

    # --- queries ------------------------------------------------------------------------------

    def in_flight(self) -> int:
        return sum(self.worker_in_flight)

    def live_rates(self, now_ns: int) -> tuple[float, float]:
        """(output tokens/s, requests/s) over the last `LIVE_WINDOW_S` seconds."""
        b_now = (now_ns - self.t0_ns) // LIVE_BUCKET_NS
        k = int(LIVE_WINDOW_S * 1e9 // LIVE_BUCKET_NS)
        sel = (self.live_slot_id > b_now - k) & (self.live_slot_id <= b_now)
        span_s = min(LIVE_WINDOW_S, max((now_ns - self.t0_ns) / 1e9, 0.1))
        ratio = self.usage_tokens / self.counted_tokens if self.counted_tokens > 0 else 1.0
        return (
            float(self.live_tokens[sel].sum()) * ratio / span_s,
            float(self.live_ends[sel].sum()) / span_s,
        )

    def level_views(self, now_ns: int, *, force: bool = False) -> list[tuple[LevelView, dict[str, Any]]]:
        """Views of every level (recomputed at most every `heavy_interval_s`, and only when changed)."""
        if not force and now_ns - self._views_at < self.heavy_interval_s * 1e9 and self._views:
            return [self._views[i] for i in self.levels if i in self._views]
        self._views_at = now_ns
        in_flight: dict[int, list[int]] = {}
        for lane in self.lanes.values():
            in_flight.setdefault(lane.level_id, []).append(lane.sent_ns)
        horizon = min(self.worker_t) if self.worker_t else now_ns
        horizon = min(max(horizon, 0), now_ns)
        out = []
        earlier_in_flight = 0
        earlier_last_end: int | None = None
        for level_id, lv in self.levels.items():
            mine = in_flight.get(level_id, [])
            ctx = LevelContext(
                now_ns=now_ns,
                horizon_ns=horizon,
                in_flight=len(mine),
                oldest_in_flight_ns=min(mine) if mine else None,
                earlier_in_flight=earlier_in_flight,
                earlier_last_end_ns=earlier_last_end,
                acked=all(lvl >= level_id for lvl in self.worker_level),
            )
            settled = lv.end_ns is not None and not mine and horizon >= lv.end_ns and earlier_in_flight == 0
            key = (lv.version, 1 if settled else 0)
            cached = self._views.get(level_id)
            if cached is None or not settled or self._view_keys.get(level_id) != key:
                cached = level_view(lv, ctx, self.t0_ns, self.slo_ttft_ms, self.slo_tpot_ms)
                self._views[level_id] = cached
                self._view_keys[level_id] = key
            out.append(cached)
            earlier_in_flight += len(mine)
            if lv.last_end_ns is not None:
                earlier_last_end = max(earlier_last_end or 0, lv.last_end_ns)
        return out

    def health(self) -> ClientHealth:
        lag = max((h[0] for h in self.worker_health), default=0.0)
        cpu = max((h[1] for h in self.worker_health), default=0.0)
        reasons = []
        if lag > self.lag_threshold_ms:
            reasons.append(f"event-loop lag p99 {lag:.1f} ms > {self.lag_threshold_ms:g} ms")
        if cpu > self.cpu_threshold:
            reasons.append(f"CPU {cpu:.0%} of a core > {self.cpu_threshold:.0%}")
        reason = ""
        if reasons:
            reason = (
                "load generator saturated ("
                + "; ".join(reasons)
                + f"): token timings may be late; try --workers {self.workers * 2}"
            )
        return ClientHealth(
            workers=self.workers, loop_lag_p99_ms=lag, cpu_share=cpu, saturated=bool(reasons), reason=reason
        )

    def histograms(
        self, now_ns: int
    ) -> tuple[dict[float | None, Histogram], dict[tuple[ItlConvention, float | None], Histogram]]:
        if now_ns - self._heavy_at < self.heavy_interval_s * 1e9 and self._heavy[0]:
            return self._heavy
        self._heavy_at = now_ns
        ttft = {w: self.series["ttft"].histogram(now_ns, w) for w in WINDOWS_S}
        itl: dict[tuple[ItlConvention, float | None], Histogram] = {}
        for conv, name in (("chunk", "itl_chunk"), ("tpot", "tpot"), ("e2e", "itl_e2e")):
            for w in WINDOWS_S:
                itl[(conv, w)] = self.series[name].histogram(now_ns, w)  # type: ignore[index]
        self._heavy = (ttft, itl)
        return self._heavy

    def lane_views(self, now_ns: int) -> tuple[tuple[LaneView, ...], int]:
        live = sorted(self.lanes.values(), key=lambda lane: lane.request_id)
        shown = live[: self.max_lanes]
        hidden = len(live) - len(shown)
        room = self.max_lanes - len(shown)
        if room > 0:
            linger = now_ns - int(LANE_LINGER_S * 1e9)
            done = [ln for ln in reversed(self.finished.values()) if (ln.end_ns or 0) >= linger][:room]
            shown = sorted(shown + done, key=lambda lane: lane.request_id)
        return tuple(self._lane_view(ln, now_ns) for ln in shown), hidden

    def _lane_view(self, lane: Lane, now_ns: int) -> LaneView:
        end = lane.end_ns if lane.end_ns is not None else now_ns
        ttft = None if lane.first_content_ns is None else (lane.first_content_ns - lane.sent_ns) / 1e6
        tps = None
        if lane.first_content_ns is not None and end > lane.first_content_ns and lane.tokens > 1:
            tps = (lane.tokens - 1) / ((end - lane.first_content_ns) / 1e9)
        return LaneView(
            request_id=lane.request_id,
            level_id=lane.level_id,
            state=lane.state,
            text_tail=lane.tail(),
            output_tokens=lane.tokens,
            age_s=max(0.0, (end - lane.sent_ns) / 1e9),
            ttft_ms=ttft,
            tokens_per_s=tps,
            error=lane.error,
        )

    def snapshot(self, now_ns: int, **meta: Any) -> Snapshot:
        """The state now. ``meta``: base_url, model, endpoint, demo, load, level_id, fatal."""
        self.seq += 1
        views = self.level_views(now_ns)
        level_list = tuple(v for v, _ in views)
        ttft_hist, itl_hist = self.histograms(now_ns)
        lanes, hidden = self.lane_views(now_ns)
        tps, rps = self.live_rates(now_ns)
        fatal = meta.pop("fatal", None) or self.fatal
        return Snapshot(
            seq=self.seq,
            elapsed_s=(now_ns - self.t0_ns) / 1e9,
            in_flight=self.in_flight(),
            completed=self.completed,
            failed=self.failed,
            output_tps=tps,
            request_per_s=rps,
            lanes=lanes,
            lanes_hidden=hidden,
            ttft_hist=ttft_hist,
            itl_hist=itl_hist,
            levels=level_list,
            knee=m.find_knee(level_list),
            errors=tuple(sorted(self.errors.items())),
            recent_errors=tuple(self.recent_errors),
            health=self.health(),
            fatal=fatal,
            cancelled=self.cancelled,
            **meta,
        )

    def detail(self, request_id: int, now_ns: int) -> RequestDetail | None:
        rec = self.recent.get(request_id)
        lane = self.lanes.get(request_id) or self.finished.get(request_id)
        if rec is None:
            if lane is None:
                return None
            ttft = None if lane.first_content_ns is None else (lane.first_content_ns - lane.sent_ns) / 1e6
            return RequestDetail(
                request_id=request_id,
                level_id=lane.level_id,
                state=lane.state,
                sent_s=(lane.sent_ns - self.t0_ns) / 1e9,
                ttft_ms=ttft,
                e2e_ms=None,
                input_tokens=None,
                output_tokens=lane.tokens,
                token_source="chunks",
                chunk_offsets_ms=(),
                chunk_tokens=(),
                itl_chunk=Stats(),
                tpot_ms=None,
                http_status=None,
                error_class=None,
                error=None,
                text=lane.text(),
            )
        chunks = np.frombuffer(rec.chunk_ns, dtype=np.int64) if len(rec.chunk_ns) else np.empty(0, np.int64)
        offsets = tuple(((chunks - rec.sent_ns) / 1e6).tolist())
        weights = m.chunk_token_weights(chunks.size, rec.output_tokens, rec.chunk_tokens)
        fig = m.request_figures(
            [rec.sent_ns],
            [rec.first_content_ns if rec.first_content_ns is not None else np.nan],
            [rec.end_ns],
            [rec.output_tokens or 0],
            [chunks.size],
        )
        tpot = float(fig.tpot_ms[0])
        ttft = rec.ttft_ns
        return RequestDetail(
            request_id=rec.request_id,
            level_id=rec.level_id,
            state=rec.status,
            sent_s=(rec.sent_ns - self.t0_ns) / 1e9,
            ttft_ms=None if ttft is None else ttft / 1e6,
            e2e_ms=rec.e2e_ns / 1e6,
            input_tokens=rec.input_tokens,
            output_tokens=rec.output_tokens,
            token_source=rec.output_source,
            chunk_offsets_ms=offsets,
            chunk_tokens=_integer_split(weights),
            itl_chunk=m.stats(m.chunk_gaps_ms(chunks)),
            tpot_ms=None if math.isnan(tpot) else tpot,
            http_status=rec.http_status,
            error_class=rec.error_class,
            error=rec.error,
            text=lane.text() if lane is not None else "",
        )


def _integer_split(weights: FloatArray) -> tuple[int, ...]:
    """Whole tokens per chunk summing to the (rounded) total, when only an even spread is known."""
    cum = np.round(np.cumsum(weights))
    return tuple(int(x) for x in np.diff(cum, prepend=0.0).tolist())
