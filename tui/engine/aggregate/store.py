"""The face's store: routes each worker `Batch` to the bounded aggregates and assembles `Snapshot`s from them.

Memory stays flat however long the run (the full data goes to the requests log, not here). The parts, each
in its own module:

- `lanes`: the in-flight and recently finished requests' lanes, the recent records, request details;
- `series`: rolling windows (10/30/60 s, whole run) per metric (`MetricSeries`): a ring of the last
  `SERIES_CAP` raw samples (exact stats whenever it still holds the whole window), a 64-slot ring of
  per-second fine histograms with running moments (used once the raw ring no longer covers the window),
  and a whole-run fine histogram;
- `levels`: per load level (`LevelAgg`): exact per-request rows and chunk gaps up to
  `LEVEL_REQUEST_CAP`/`LEVEL_GAP_CAP`, then a uniform reservoir sample of that size (stats become
  estimates; counts and throughput stay exact, as they come from a per-level timeline of at most 4096
  buckets whose width doubles as the level grows);
- `arrivals`: the workers' arrival counts (tokens by time, TTFT and gap bins, in-flight streams included)
  into the levels' timelines and binned logs (`binned_log`) and the rolling TTFT/ITL series; a level whose
  answers outlive its whole-request window is measured from them (`level_arrivals`);
- `pending`: the arrivals and successful records gathered since the last fold: folded into the series and
  levels when those are read (views, results), once for many batches;
- `saturation`: the workers' health readings and the saturated flag; `live`: the live rates;
- `views`: the costly views (level views, histograms), published as one immutable bundle.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from tui.engine.aggregate.lanes import Lane, Lanes
from tui.engine.aggregate.levels import LevelAgg
from tui.engine.aggregate.live import LiveRates
from tui.engine.aggregate.lost import NODE_LOST_ERROR, lost_records
from tui.engine.aggregate.metrics import find_knee
from tui.engine.aggregate.outages import Outages
from tui.engine.aggregate.pending import Pending
from tui.engine.aggregate.saturation import (
    FIGURES_JUDGED,
    LevelClient,
    LevelLoad,
    Saturation,
    limit_notices,
    uncertain_figures,
)
from tui.engine.aggregate.series import MetricSeries, Reservoir, Timeline
from tui.engine.aggregate.views import LevelEntry, ViewInputs, ViewMaker, Views
from tui.engine.config import LoadTarget
from tui.engine.records import RequestRecord
from tui.engine.snapshot import (
    ClientEvidence,
    ClientHealth,
    Knee,
    LaneView,
    LevelView,
    RequestDetail,
    Snapshot,
)
from tui.engine.wire import Batch

__all__ = ["Lane", "LevelAgg", "MetricSeries", "Reservoir", "Store", "Timeline", "Views"]

RECENT_ERRORS = 8
FATAL_AFTER = 3
"""If the first this-many finished requests all fail to connect or get a non-429 4xx, the target is
unusable: `Snapshot.fatal` is set."""


class Store:
    """Drains worker batches into bounded aggregates; computes snapshots, level views and details.

    Not thread-safe: the handle serialises access with a lock. The costly views are computed only by
    `refresh_views` (one thread at a time: the handle's reader while it runs, else the caller) and read by
    `snapshot` from the published bundle.
    """

    def __init__(
        self,
        t0_ns: int,
        workers: int,
        *,
        slo_ttft_ms: float | None = None,
        slo_tpot_ms: float | None = None,
        slo_e2e_ms: float | None = None,
        lag_threshold_ms: float | None = None,
        cpu_threshold: float = 0.6,
        max_lanes: int = 64,
        heavy_interval_s: float = 0.5,
        series_cap: int | None = None,
    ) -> None:
        """``series_cap``: raw samples per rolling metric (default `SERIES_CAP`, written at construction: a
        face that never gets a request, `tokentop watch`, asks for a small one)."""
        self.t0_ns = t0_ns
        self.workers = workers
        self.slo_ttft_ms = slo_ttft_ms
        self.slo_tpot_ms = slo_tpot_ms
        self.slo_e2e_ms = slo_e2e_ms
        self.heavy_interval_s = heavy_interval_s
        self._series: dict[str, MetricSeries] = {
            name: MetricSeries(t0_ns, series_cap) for name in ("ttft", "e2e", "tpot", "itl_e2e", "itl_chunk")
        }
        self._levels: dict[int, LevelAgg] = {}
        self._pending = Pending()
        """Arrivals and successful records not yet folded into the levels and series: folded when those are
        read (`levels`, `series`, due views), so once for every worker's batches (`aggregate.pending`)."""
        self.lanes = Lanes(max_lanes)
        self.saturation = Saturation(t0_ns, workers, lag_threshold_ms, cpu_threshold)
        self._ended_client: dict[int, LevelClient] = {}
        """An ended level's client judgement, fixed once (`_judge_ended`): later windows never move it."""
        self.live = LiveRates(t0_ns)
        self.completed = self.failed = self.cancelled = 0
        self.skipped_lines = 0
        """Malformed stream lines skipped over the run (their streams went on; not failures)."""
        self.input_tokens = 0
        self.output_tokens = 0
        """Tokens of the successful requests, as the levels count them (tokentop's own ``/metrics``)."""
        self.errors: Counter[str] = Counter()
        self.recent_errors: deque[str] = deque(maxlen=RECENT_ERRORS)
        self.notices: list[str] = []
        self.fatal: str | None = None
        self.fatal_halts = False
        """`fatal` is a configuration error (HTTP 4xx on every request): the handle stops issuing."""
        self._early: list[RequestRecord] = []
        """Finished records before the first success (to tell an unusable target)."""
        self._any_ok = False
        self.outages = Outages(t0_ns)
        """When the server stopped answering, and came back (`tui.engine.aggregate.outages`)."""
        self.worker_t = [0] * workers
        self.worker_level = [0] * workers
        self.worker_in_flight = [0] * workers
        self.lost_workers: set[int] = set()
        """Workers whose node went away (`lose_workers`): no longer waited for by the level views."""
        self.seq = 0
        self._views = ViewMaker(heavy_interval_s)
        self.on_views: Callable[[int, bool], None] | None = None
        """Called with ``now_ns`` and ``force`` whenever `refresh_views` publishes a new bundle (a session
        records when, so its replay recomputes the views at the same moments and shows the same figures)."""

    # --- levels -------------------------------------------------------------------------------

    @property
    def levels(self) -> dict[int, LevelAgg]:
        """Every level's aggregate, with everything ingested so far folded in."""
        self.fold()
        return self._levels

    @property
    def series(self) -> dict[str, MetricSeries]:
        """The rolling series, with everything ingested so far folded in."""
        self.fold()
        return self._series

    def fold(self) -> None:
        """Fold the arrivals and records gathered since the last fold into the levels and series."""
        if self._pending:
            self._pending.fold(self._levels, self._series)

    def begin_level(self, level_id: int, target: LoadTarget, t_ns: int) -> None:
        """A new load level starts now (and the previous one ends)."""
        self.end_level(t_ns)
        self._levels[level_id] = LevelAgg(level_id, target, t_ns)
        self._views.invalidate()

    def end_level(self, t_ns: int) -> None:
        """The current level ends at ``t_ns`` (pause, stop or a new level)."""
        for lv in self._levels.values():
            if lv.end_ns is None:
                lv.end_ns = t_ns
                lv.version += 1
        self._views.invalidate()

    @property
    def current_level(self) -> LevelAgg | None:
        """The latest level, or None before the first."""
        return next(reversed(self._levels.values()), None) if self._levels else None

    # --- ingest -------------------------------------------------------------------------------

    def add_notice(self, notice: str) -> None:
        """A one-line notice (from a worker or the face's own threads), kept once, shown with the errors."""
        if notice not in self.notices:
            self.notices.append(notice)
            self.recent_errors.append(notice)

    def ingest(self, batch: Batch) -> Sequence[RequestRecord]:
        """Fold one worker batch in; return the records that finished in it (for the requests log)."""
        w = batch.worker
        t_ns = batch.t_ns
        self.worker_t[w] = max(self.worker_t[w], t_ns)
        if batch.level_id != self.worker_level[w]:
            self.worker_level[w] = batch.level_id
            acked = self._levels.get(batch.level_id)
            if acked is not None:
                acked.applied_ns[w] = t_ns if batch.level_at_ns is None else batch.level_at_ns
        self.worker_in_flight[w] = batch.in_flight
        if batch.health is not None:
            self.saturation.reading(w, batch.health)
            cur = self.current_level
            if cur is not None:
                cur.max_lag_ms = max(cur.max_lag_ms, batch.health.loop_lag_p99_ms)
                cur.max_cpu = max(cur.max_cpu, batch.health.cpu_share)
        if batch.health_window is not None:
            self.saturation.window(w, batch.health_window, t_ns)
        for notice in batch.notices:
            self.add_notice(notice)
        if batch.dropped:
            dropped_in = self._levels.get(batch.level_id)
            if dropped_in is not None:
                dropped_in.dropped += batch.dropped
                dropped_in.version += 1
        for delta in batch.lanes:
            self.lanes.apply(delta)
        if batch.tokens:
            self.live.add_tokens(t_ns, batch.tokens)
        if batch.arrivals:
            self._pending.arrivals.append((t_ns, batch.arrivals))
        if batch.records:
            self._finish(batch.records)
        if self._pending.full:
            self.fold()
        return batch.records

    def lose_workers(
        self, workers: Sequence[int], at_ns: int, cause: str = NODE_LOST_ERROR
    ) -> tuple[int, list[RequestRecord]]:
        """``workers`` are gone at ``at_ns`` (``cause``: their node lost, or a signal killed one): the views
        stop waiting for them, their in-flight requests become cancelled ``node_lost`` records saying
        ``cause`` (the rest counted cancelled), the level running then is flagged, its window ending there.
        Returns (requests they had in flight, the records made, for the log)."""
        lost = [w for w in workers if 0 <= w < self.workers and w not in self.lost_workers]
        if not lost:
            return 0, []
        self.lost_workers.update(lost)
        in_flight = sum(self.worker_in_flight[w] for w in lost)
        for w in lost:
            self.worker_in_flight[w] = 0
        records = lost_records(list(self.lanes.live.values()), set(lost), self.workers, at_ns, cause)
        running = [
            lv for lv in self._levels.values() if lv.start_ns <= at_ns and (lv.end_ns or at_ns) >= at_ns
        ]
        for lv in running:
            lv.workers_lost += len(lost)
            lv.lost_at_ns = at_ns if lv.lost_at_ns is None else min(lv.lost_at_ns, at_ns)
            lv.version += 1
        self._finish(records)
        unseen = max(0, in_flight - len(records))
        self.cancelled += unseen
        if running and unseen:
            running[-1].cancelled += unseen
        self._views.invalidate()
        return in_flight, records

    def _finish(self, records: Sequence[RequestRecord]) -> None:
        ok_recs: list[RequestRecord] = []
        for rec in records:
            self.lanes.finish(rec)
            said = self.outages.see(rec)
            if said is not None:
                self.add_notice(said)
                self._views.invalidate()
            self.skipped_lines += rec.skipped_lines
            lv = self._levels.get(rec.level_id)
            if lv is not None:
                lv.count(rec)
            if rec.status == "ok":
                self.completed += 1
                self.input_tokens += rec.input_tokens or 0
                self.output_tokens += rec.output_tokens or 0
                self._any_ok = True
                ok_recs.append(rec)
                self.live.add_end(rec.end_ns)
                if rec.output_source == "usage" and rec.output_tokens is not None:
                    counted = (
                        float(sum(rec.chunk_tokens)) if rec.chunk_tokens is not None else len(rec.chunk_ns)
                    )
                    self.live.add_usage(counted, rec.output_tokens)
            elif rec.status == "cancelled":
                self.cancelled += 1
            else:
                self.failed += 1
                klass = rec.error_class or "client"
                self.errors[klass] += 1
                self.recent_errors.append(f"#{rec.request_id} {klass}: {rec.error}")
            if not self._any_ok and rec.status == "error":
                self._early.append(rec)
                self._check_fatal()
        self._pending.ok.extend(ok_recs)

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
            # a wrong URL, path or model repeats on every request; a refused connection may be a server
            # still starting or restarting, which the users' back-off waits out
            self.fatal_halts = all(r.error_class == "http_4xx" for r in self._early)

    # --- the costly views ---------------------------------------------------------------------

    def refresh_views(self, now_ns: int, *, force: bool = False) -> Views:
        """Recompute the level views and histograms if older than `heavy_interval_s` (or the levels changed;
        all with ``force``), publish and return them. One thread at a time: the reader, else a snapshot's."""
        inputs = ViewInputs(
            t0_ns=self.t0_ns,
            in_flight_sent=self.lanes.sent_by_level(),
            worker_t_ns=[t for w, t in enumerate(self.worker_t) if w not in self.lost_workers],
            worker_level=[v for w, v in enumerate(self.worker_level) if w not in self.lost_workers],
            slo_ttft_ms=self.slo_ttft_ms,
            slo_tpot_ms=self.slo_tpot_ms,
            slo_e2e_ms=self.slo_e2e_ms,
            outages=self.outages.views(),
            outages_version=self.outages.version,
        )
        before = self._views.views
        if self._views.due(now_ns, force=force):
            self.fold()
        views = self._views.refresh(now_ns, self._levels, self._series, inputs, force=force)
        if views is not before:
            self._judge_ended(views.levels)
            if self.on_views is not None:
                self.on_views(now_ns, force)
        return views

    @property
    def views(self) -> Views:
        """The latest published views (never recomputed here)."""
        return self._views.views

    @property
    def views_current(self) -> bool:
        """The published level views include the latest level change (`begin_level`, `end_level`)."""
        return self._views.views.generation == self._views.generation

    def level_views(self, now_ns: int, *, force: bool = False) -> list[LevelEntry]:
        """Views of every level (with the results JSON's extra figures): the published ones, or with
        ``force`` freshly computed (and published) now."""
        views = self.refresh_views(now_ns, force=True) if force else self.views
        return list(views.level_views)

    # --- queries ------------------------------------------------------------------------------

    def in_flight(self) -> int:
        """Requests in flight, as the workers last reported."""
        return sum(self.worker_in_flight)

    def live_rates(self, now_ns: int) -> tuple[float, float]:
        """(output tokens/s, requests/s) over the last few seconds (`tui.engine.aggregate.live`)."""
        return self.live.rates(now_ns)

    def health(self) -> ClientHealth:
        """The load generator's health now (`Saturation.health`)."""
        return self.saturation.health()

    def lane_views(self, now_ns: int) -> tuple[tuple[LaneView, ...], int]:
        """Lanes to show (in flight first, then recently finished) and how many in-flight ones did not fit."""
        lanes, hidden = self.lanes.views(now_ns)
        return lanes, self._hidden(hidden)

    def _hidden(self, hidden: int) -> int:
        """In-flight requests not shown: the workers send lanes only within their budget
        (`tui.engine.load.lane_budget`), so the count comes from what they say is in flight."""
        shown = len(self.lanes.live) - hidden
        return max(hidden, self.in_flight() - shown)

    def detail(self, request_id: int, now_ns: int) -> RequestDetail | None:
        """A recent or in-flight request's detail (`Lanes.detail`), or None if it is no longer kept."""
        return self.lanes.detail(request_id, self.t0_ns)

    # the run's health figures, as `EngineHandle.results` reads them

    @property
    def max_lag_ms(self) -> float:
        """The largest rolling loop-lag p99 any worker reported."""
        return self.saturation.max_lag_ms

    @property
    def max_cpu(self) -> float:
        """The largest rolling CPU share any worker reported."""
        return self.saturation.max_cpu

    @property
    def saturated_ever(self) -> bool:
        """Some worker was saturated at some point of the run."""
        return self.saturation.saturated_ever

    @property
    def saturated_spans(self) -> list[list[float | None]]:
        """[from_s, to_s] of run time when some worker was saturated (`Saturation.saturated_spans`)."""
        return self.saturation.saturated_spans

    def _client_limited(
        self, levels: tuple[LevelView, ...], knee: Knee | None, now_ns: int
    ) -> tuple[tuple[LevelView, ...], Knee | None]:
        """The levels with the client's judgement over each one's window (`Saturation.level_client`): the
        timing bound and the figures it is material to on every level, the client-limited ones marked; and
        the knee without those (`find_knee`)."""
        now_s = (now_ns - self.t0_ns) / 1e9
        marked = []
        for lv in levels:
            judged = self._ended_client.get(lv.level_id) if lv.ended_s is not None else None
            if judged is None:
                judged = self.saturation.level_client(lv.span_s(now_s), lv.e2el.p50, self._asked(lv))
            if judged is None:
                marked.append(lv)
                continue
            figures = {name: getattr(lv, name) for name in FIGURES_JUDGED}
            asked = self._asked(lv)
            evidence = ClientEvidence(
                cpu_share=judged.cpu,
                mean_lag_ms=judged.mean_lag_ms,
                e2e_p50_ms=lv.e2el.p50,
                in_flight=judged.in_flight if asked.users else None,
                users=asked.users,
                send_shortfall=asked.send_shortfall,
                limited_by=judged.limited_by,
            )
            marked.append(
                replace(
                    lv,
                    client_lag_ms=judged.lag_ms,
                    timing_uncertain=uncertain_figures(judged.lag_ms, figures),
                    client_limited=judged.cause is not None,
                    client_limit_cause=judged.cause,
                    client_evidence=evidence,
                )
            )
        marked_levels = tuple(marked)
        if not any(lv.client_limited for lv in marked_levels):
            return marked_levels, knee
        return marked_levels, find_knee(marked_levels)

    def _judge_ended(self, levels: tuple[LevelView, ...]) -> None:
        """Fix each ended level's judgement at the first views published after its end that a window covers:
        a session records that moment (not a snapshot's: fixed there, its replay showed other * marks)."""
        for lv in levels:
            if lv.ended_s is not None and lv.level_id not in self._ended_client:
                judged = self.saturation.level_client(lv.span_s(lv.ended_s), lv.e2el.p50, self._asked(lv))
                if judged is not None:  # not before a window covers it
                    self._ended_client[lv.level_id] = judged

    def _asked(self, lv: LevelView) -> LevelLoad:
        """What ``lv`` asked of the client: a closed loop's users (not judged where failures or an outage
        held users back), an uncapped open loop's send shortfall (not judged where the back-off dropped
        arrivals on purpose, an outage held them, or a worker's share was lost)."""
        agg = self.levels.get(lv.level_id)
        capped = agg is not None and agg.target.max_concurrency is not None
        if lv.mode == "concurrency":
            clean = lv.window_failed == 0 and lv.down_s == 0 and lv.workers_lost == 0
            return LevelLoad(users=lv.value if clean else None)
        if capped:
            return LevelLoad()
        held = lv.dropped > 0 or lv.down_s > 0 or lv.workers_lost > 0
        return LevelLoad(send_shortfall=None if held else lv.send_shortfall, on_schedule=True)

    def notices_with(self, levels: Sequence[LevelView]) -> tuple[str, ...]:
        """The run's notices and one line per level the client limited, from those levels' own flags (the
        one source: a level judged the client's early and not at the end leaves no stale line)."""
        return (*self.notices, *limit_notices(levels, self.saturation.workers))

    def snapshot(self, now_ns: int, **meta: Any) -> Snapshot:
        """The state now, with the level views and histograms of the latest published `Views` (cheap:
        nothing costly is computed here). ``meta``: base_url, model, endpoint, demo, load, level_id, fatal."""
        self.seq += 1
        views = self.views
        lanes, hidden = self.lane_views(now_ns)
        tps, rps = self.live.rates(now_ns)
        fatal = meta.pop("fatal", None) or self.fatal
        levels, knee = self._client_limited(views.levels, views.knee, now_ns)
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
            ttft_hist=views.ttft_hist,
            itl_hist=views.itl_hist,
            e2e_hist=views.e2e_hist,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            levels=levels,
            knee=knee,
            errors=tuple(sorted(self.errors.items())),
            recent_errors=tuple(self.recent_errors),
            health=self.saturation.health(),
            fatal=fatal,
            cancelled=self.cancelled,
            skipped_lines=self.skipped_lines,
            outages=self.outages.views(),
            **meta,
        )
