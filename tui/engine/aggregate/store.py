"""Bounded aggregation of what the engine workers report, and `Snapshot`s computed from it on demand.

Memory stays flat however long the run (the full data goes to the requests log, not here):

- rolling windows (10/30/60 s, whole run) per metric (`tui.engine.series.MetricSeries`): a ring of the
  last `SERIES_CAP` raw samples (exact stats whenever it still holds the whole window), a 64-slot ring of
  per-second fine histograms with running moments (used once the raw ring no longer covers the window),
  and a whole-run fine histogram;
- per load level (`tui.engine.levels.LevelAgg`): exact per-request rows and chunk gaps up to
  `LEVEL_REQUEST_CAP`/`LEVEL_GAP_CAP`, then a uniform reservoir sample of that size (stats become
  estimates; counts and throughput stay exact, as they come from a per-level timeline of at most 4096
  buckets whose width doubles as the level grows);
- the most recent finished records (for `detail()`: at most `RECENT_CAP` of them and `RECENT_CHUNKS` chunk
  stamps in all, so long outputs cannot blow it up), lane text capped per request;
- per in-flight request, the latest `LANE_CHUNKS` chunk stamps (for a live `detail()`), dropped at its end
  (its record carries them all).
"""

from __future__ import annotations

import math
import os
from array import array
from collections import Counter, OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate import metrics as m
from tui.engine.aggregate.levels import LevelAgg, LevelContext, level_view
from tui.engine.aggregate.series import MetricSeries, Reservoir, Timeline
from tui.engine.config import LoadTarget
from tui.engine.load.health import Sustain
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
)
from tui.engine.wire import Batch

__all__ = ["Lane", "LevelAgg", "MetricSeries", "Reservoir", "Store", "Timeline"]

RECENT_CAP = 2_000
RECENT_CHUNKS = 500_000
"""Chunk stamps kept across the recent records (4 MB)."""
"""Finished records kept for `detail()`."""
TEXT_CAP = 32_768
"""Characters of generated text kept per request (the tail)."""
TEXT_TAIL = 300
LANE_CHUNKS = 4096
"""Chunk stamps an in-flight request's detail shows (the latest; `RequestDetail.chunks_dropped` counts the
earlier ones). A lane holds at most a quarter more between trims: 200 long outputs stay under 20 MB."""
LIVE_WINDOW_S = 5.0
"""The live gauges (output tokens/s, requests/s) average over this many seconds."""
LIVE_BUCKET_NS = 100_000_000
LIVE_BUCKETS = 600
LANE_LINGER_S = 1.5
"""A finished request's lane stays visible this long (so a face can flash ok/error)."""
RECENT_ERRORS = 8
SATURATED_SPANS = 100
FATAL_AFTER = 3
"""If the first this-many finished requests all fail to connect or get a non-429 4xx, the target is
unusable: `Snapshot.fatal` is set."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


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
    chunk_ns: array[int] = field(default_factory=lambda: array("q"))
    """Arrival of the latest content chunks (see `LANE_CHUNKS`); emptied when the request finishes."""
    chunk_tokens: array[int] | None = field(default_factory=lambda: array("q"))
    """Tokens in each of those chunks while the server counts them per chunk; else None."""
    chunks_dropped: int = 0
    """Chunks trimmed off the front of `chunk_ns`."""

    def add_chunks(self, stamps: bytes, counts: bytes | None) -> None:
        """Append a worker delta's new chunk stamps (and per-chunk token counts, None once unknown), trimming
        to the latest `LANE_CHUNKS` once a quarter more has piled up (so the memmove is rare)."""
        if counts is None:
            self.chunk_tokens = None
        if not stamps:
            return
        self.chunk_ns.frombytes(stamps)
        if self.chunk_tokens is not None and counts:
            self.chunk_tokens.frombytes(counts)
        excess = len(self.chunk_ns) - LANE_CHUNKS
        if excess > LANE_CHUNKS // 4:
            del self.chunk_ns[:excess]
            if self.chunk_tokens is not None:
                del self.chunk_tokens[:excess]
            self.chunks_dropped += excess

    def drop_chunks(self) -> None:
        """Forget the stamps (the finished record has them all)."""
        self.chunk_ns = array("q")
        self.chunk_tokens = None
        self.chunks_dropped = 0

    def append(self, text: str) -> None:
        """Add streamed text, trimming to the last `TEXT_CAP` characters now and then."""
        if not text:
            return
        self.parts.append(text)
        self.chars += len(text)
        if self.chars > 2 * TEXT_CAP:
            joined = "".join(self.parts)[-TEXT_CAP:]
            self.parts = [joined]
            self.chars = len(joined)

    def text(self) -> str:
        """The kept text (its last `TEXT_CAP` characters)."""
        return "".join(self.parts)[-TEXT_CAP:]

    def tail(self, n: int = TEXT_TAIL) -> str:
        """The last ``n`` characters."""
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
        self.recent_chunks = 0
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
        """Raw maxima of the rolling readings over the run (a momentary stall counts: for transparency)."""
        self.sustain = [Sustain(lag_threshold_ms, cpu_threshold) for _ in range(workers)]
        self.saturated_ever = False
        """Some worker was saturated (sustained, see `Sustain`) at some point of the run."""
        self.saturated_spans: list[list[float | None]] = []
        """When some worker was flagged saturated: [from_s, to_s] of run time (to_s None while it lasts; at
        most `SATURATED_SPANS` kept, the latest). The condition began one health window before from_s."""
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
        """The current level ends at ``t_ns`` (pause, stop or a new level)."""
        for lv in self.levels.values():
            if lv.end_ns is None:
                lv.end_ns = t_ns
                lv.version += 1
        self._views_at = -math.inf

    @property
    def current_level(self) -> LevelAgg | None:
        """The latest level, or None before the first."""
        return next(reversed(self.levels.values()), None) if self.levels else None

    # --- ingest -------------------------------------------------------------------------------

    def ingest(self, batch: Batch) -> Sequence[RequestRecord]:
        """Fold one worker batch in; return the records that finished in it (for the requests log)."""
        w = batch.worker
        t_ns = batch.t_ns
        self.worker_t[w] = max(self.worker_t[w], t_ns)
        level_id = batch.level_id
        if level_id != self.worker_level[w]:
            self.worker_level[w] = level_id
            acked = self.levels.get(level_id)
            if acked is not None:
                acked.applied_ns[w] = t_ns if batch.level_at_ns is None else batch.level_at_ns
        self.worker_in_flight[w] = batch.in_flight
        health = batch.health
        if health is not None:
            lag, cpu = health
            self.worker_health[w] = (lag, cpu)
            self.max_lag_ms = max(self.max_lag_ms, lag)
            self.max_cpu = max(self.max_cpu, cpu)
            cur = self.current_level
            if cur is not None:
                cur.max_lag_ms = max(cur.max_lag_ms, lag)
                cur.max_cpu = max(cur.max_cpu, cpu)
        window = batch.health_window
        if window is not None:
            was = any(s.saturated for s in self.sustain)
            if self.sustain[w].update(*window):
                self.saturated_ever = True
            self._track_saturation(was, any(s.saturated for s in self.sustain), t_ns)
        for notice in batch.notices:
            if notice not in self.notices:
                self.notices.append(notice)
                self.recent_errors.append(notice)
        for rid, level_id, sent_ns, text, tokens, first_ns, stamps, counts in batch.lanes:
            lane = self.lanes.get(rid)
            if lane is None:
                if rid in self.finished:
                    continue
                lane = self.lanes[rid] = Lane(rid, level_id, sent_ns)
            lane.sent_ns = sent_ns  # a retry restamps the send: offsets count from the latest
            lane.append(text)
            lane.tokens = tokens
            if first_ns is not None:
                lane.first_content_ns = first_ns
                lane.state = "streaming"
            if stamps or counts is None:
                lane.add_chunks(stamps, counts)
        if batch.tokens:
            self._live_add(self.live_tokens, t_ns, batch.tokens)
        records = batch.records
        if records:
            self._finish(records)
        return records

    def _track_saturation(self, was: bool, now: bool, t_ns: int) -> None:
        t_s = round((t_ns - self.t0_ns) / 1e9, 3)
        if now and not was:
            self.saturated_spans.append([t_s, None])
            del self.saturated_spans[:-SATURATED_SPANS]
        elif was and not now and self.saturated_spans:
            self.saturated_spans[-1][1] = t_s

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
            lane.drop_chunks()
            self.finished[rec.request_id] = lane
            if len(self.finished) > 256:
                self.finished.popitem(last=False)
            self.recent[rec.request_id] = rec
            self.recent_chunks += len(rec.chunk_ns)
            while len(self.recent) > 1 and (
                len(self.recent) > RECENT_CAP or self.recent_chunks > RECENT_CHUNKS
            ):
                _, old = self.recent.popitem(last=False)
                self.recent_chunks -= len(old.chunk_ns)
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
        """Requests in flight, as the workers last reported."""
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

    def level_views(
        self, now_ns: int, *, force: bool = False, max_age_s: float | None = None
    ) -> list[tuple[LevelView, dict[str, Any]]]:
        """Views of every level: recomputed when older than ``max_age_s`` (default `heavy_interval_s`) and
        then only the levels that changed."""
        if not force and self._fresh(self._views_at, now_ns, max_age_s) and self._views:
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
        """Worst worker's rolling loop lag and CPU share; saturated when some worker's condition (lag p99
        over the lag threshold or CPU share over the CPU threshold) held in two consecutive health windows
        (`Sustain`), so one noisy moment never flags. The advice fits the cause, from the saturated workers'
        latest window: a worker using most of a core needs company (``--workers``); a lagging worker that
        uses little CPU is waiting for a core (the machine is busy) and more workers would not help."""
        raw_lag = lag = max((h[0] for h in self.worker_health), default=0.0)
        raw_cpu = cpu = max((h[1] for h in self.worker_health), default=0.0)
        hot = [s.last for s in self.sustain if s.saturated]  # each one's latest window is over a threshold
        if hot:  # the figures in the message: the saturated workers' latest windows, not a rolling moment
            lag = max(h[0] for h in hot)
            cpu = max(h[1] for h in hot)
        busy = bool(hot) and cpu > self.cpu_threshold
        lagging = bool(hot) and lag > self.lag_threshold_ms
        reason = ""
        if busy:
            cores = os.cpu_count() or 1
            advice = (
                f"try --workers {self.workers * 2}"
                if self.workers * 2 <= cores
                else f"this machine has {cores} cores for {self.workers} workers and the rest"
            )
            lag_note = f", event-loop lag p99 {lag:.1f} ms" if lagging else ""
            reason = (
                f"load generator saturated (a worker uses {cpu:.0%} of a core{lag_note}): "
                f"token timings may be late; {advice}"
            )
        elif lagging:
            reason = (
                f"load generator delayed (event-loop lag p99 {lag:.1f} ms at {cpu:.0%} of a core): token "
                "timings may be late; the machine may be short of CPU (--workers helps only CPU-bound ones)"
            )
        return ClientHealth(
            workers=self.workers,
            loop_lag_p99_ms=raw_lag,
            cpu_share=raw_cpu,
            saturated=bool(hot),
            reason=reason,
        )

    def histograms(
        self, now_ns: int, *, max_age_s: float | None = None
    ) -> tuple[dict[float | None, Histogram], dict[tuple[ItlConvention, float | None], Histogram]]:
        """TTFT and ITL histograms per window: recomputed when older than ``max_age_s`` (default
        `heavy_interval_s`)."""
        if self._fresh(self._heavy_at, now_ns, max_age_s) and self._heavy[0]:
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
        """Lanes to show (in flight first, then recently finished) and how many in-flight ones did not fit."""
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

    def _fresh(self, computed_ns: float, now_ns: int, max_age_s: float | None) -> bool:
        """Whether parts computed at ``computed_ns`` are younger than ``max_age_s`` (default
        `heavy_interval_s`)."""
        max_age_s = self.heavy_interval_s if max_age_s is None else max_age_s
        return now_ns - computed_ns < max_age_s * 1e9

    def refresh(self, now_ns: int) -> None:
        """Recompute the costly parts (level views, histograms) if due. A face's background thread calls
        this so that `snapshot` itself, called from the UI thread, stays cheap (see ``heavy_max_age_s``)."""
        self.level_views(now_ns)
        self.histograms(now_ns)

    def snapshot(self, now_ns: int, *, heavy_max_age_s: float | None = None, **meta: Any) -> Snapshot:
        """The state now. ``meta``: base_url, model, endpoint, demo, load, level_id, fatal.

        Level views and histograms are reused while younger than ``heavy_max_age_s`` (default
        `heavy_interval_s`); a caller whose `refresh` runs elsewhere passes a longer age, so that the
        snapshot recomputes them only if that refresher has stopped."""
        self.seq += 1
        views = self.level_views(now_ns, max_age_s=heavy_max_age_s)
        level_list = tuple(v for v, _ in views)
        ttft_hist, itl_hist = self.histograms(now_ns, max_age_s=heavy_max_age_s)
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
        """A finished request from the recent ring, or one from its lane: in flight, its chunk timeline so
        far (the latest `LANE_CHUNKS` chunks); finished but no longer in the ring, text and TTFT only."""
        rec = self.recent.get(request_id)
        lane = self.lanes.get(request_id) or self.finished.get(request_id)
        if rec is None:
            return None if lane is None else self._lane_detail(lane)
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

    def _lane_detail(self, lane: Lane) -> RequestDetail:
        kept = lane.chunk_ns[-LANE_CHUNKS:]  # a copy: numpy must not hold the lane's growing buffer
        chunks = np.frombuffer(kept, dtype=np.int64) if len(kept) else np.empty(0, np.int64)
        dropped = lane.chunks_dropped + len(lane.chunk_ns) - len(kept)
        counts = lane.chunk_tokens
        if counts is not None and 0 < len(counts) == len(lane.chunk_ns):
            source, per_chunk = "usage", tuple(counts[-LANE_CHUNKS:])
        else:  # the worker counts one per chunk when the server does not say
            source, per_chunk = "chunks", (1,) * chunks.size
        tpot: float | None = None
        if lane.first_content_ns is not None and chunks.size:
            # TPOT as for a finished request, with the latest chunk standing in for the end
            fig = m.request_figures(
                [lane.sent_ns],
                [lane.first_content_ns],
                [int(chunks[-1])],
                [lane.tokens],
                [chunks.size + dropped],
            )
            value = float(fig.tpot_ms[0])
            tpot = None if math.isnan(value) else value
        ttft = None if lane.first_content_ns is None else (lane.first_content_ns - lane.sent_ns) / 1e6
        return RequestDetail(
            request_id=lane.request_id,
            level_id=lane.level_id,
            state=lane.state,
            sent_s=(lane.sent_ns - self.t0_ns) / 1e9,
            ttft_ms=ttft,
            e2e_ms=None if lane.end_ns is None else (lane.end_ns - lane.sent_ns) / 1e6,
            input_tokens=None,
            output_tokens=lane.tokens,
            token_source=source,
            chunk_offsets_ms=tuple(((chunks - lane.sent_ns) / 1e6).tolist()),
            chunk_tokens=per_chunk,
            itl_chunk=m.stats(m.chunk_gaps_ms(chunks)),
            tpot_ms=tpot,
            http_status=None,
            error_class=None,
            error=lane.error,
            text=lane.text(),
            chunks_dropped=dropped,
        )


def _integer_split(weights: FloatArray) -> tuple[int, ...]:
    """Whole tokens per chunk summing to the (rounded) total, when only an even spread is known."""
    cum = np.round(np.cumsum(weights))
    return tuple(int(x) for x in np.diff(cum, prepend=0.0).tolist())
