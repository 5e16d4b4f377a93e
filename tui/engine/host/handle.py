"""`EngineHandle`: the face's side of the engine. Commands in, snapshots out; the load runs elsewhere.

The handle lives in the face's process (the app or the bench). `start()` returns at once; a background thread
checks the server (`/v1/models`, also resolving the model name), spawns the worker processes (``spawn``
context: the app has threads, so no fork), sends each its share of the load, and then reads their batches
into a bounded `Store` and the requests log. What crosses the pipes is typed in `tui.engine.wire` (a
`WorkerSpec` to start, `ApplyShare`/`Stop` in, `Batch`/`WorkerFailed`/`Goodbye` out). `snapshot()` summarises
the store with numpy on demand. Its parts, one module each beside it: `reader` (the receive loop and the
requests log) and `worker_pool` (local processes) or `ray_pool` behind `pool`, all held by `workers`;
`server_scrape`, and `config_record` (the configs as the results record them); its decisions are
`tui.engine.control`.

Workers are started with multiprocessing's ``spawn``, which re-imports the face's main module in each
worker: a script that creates an `EngineHandle` must keep its top level behind
``if __name__ == "__main__":`` (``tokentop``, ``python -m tui`` and pytest already do).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.engine.aggregate.lost import NODE_LOST_ERROR
from tui.engine.aggregate.series import IDLE_SERIES_CAP
from tui.engine.api import Engine
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.control.guard import ConfigGuard
from tui.engine.host.cache_reset import ResetOutcome, reset_prefix_cache
from tui.engine.host.isl_probe import probe_isl, skip_reason
from tui.engine.host.pool import PoolError
from tui.engine.host.probe import Probed, ProbeError, probe_models
from tui.engine.host.reader import RequestsLogFile
from tui.engine.host.run_core import RUN_READS, RunCore, new_store, write_results
from tui.engine.host.workers import Workers
from tui.engine.records import RequestRecord
from tui.engine.snapshot import RampVerdict, RequestDetail, Snapshot
from tui.engine.traces.sharing import named_block_share
from tui.engine.wire import Batch, WorkerLost

if TYPE_CHECKING:
    from tui.engine.recording.file import Lost
    from tui.engine.recording.recorder import SessionRecorder
    from tui.engine.records import RequestRecord
    from tui.engine.results.build import RunInfo
    from tui.engine.results.model import Results
    from tui.engine.telemetry.otlp import Spans


def _level_key(t: LoadTarget) -> tuple[Any, ...]:
    # a trace's level is its speed (``value``); every other mode's is its users or rate
    return (t.mode, t.value, t.arrival, t.max_concurrency)


class EngineHandle:
    """Implements `tui.engine.api.Engine` with the load generated in ``workers`` processes."""

    def __init__(
        self,
        target: TargetConfig,
        workload: WorkloadConfig,
        load: LoadTarget,
        *,
        workers: int = 1,
        requests_log: Path | None = None,
        options: EngineOptions | None = None,
        probe: bool = True,
    ) -> None:
        """``probe=False``: the face has checked the server itself (`probe_server`) and put the model in
        ``target``; the handle then starts the workers without asking ``/v1/models`` again. With
        ``options.placement`` the workers run on a Ray cluster (`tui.engine.host.ray_pool`), placed here:
        `tui.engine.host.pool.PoolError` says in one line why they cannot be."""
        if not probe and not target.model:
            raise ValueError("probe=False needs target.model (from probe_server)")
        self.target = target
        self._probe = probe
        self.workload = workload
        self.requests_log_path = requests_log
        self.options = options or EngineOptions()
        self._lock = threading.RLock()
        self._guard = ConfigGuard(has_key=bool(target.api_key))
        self._workers = Workers(
            self.options, workers, self._lock, seed=workload.seed,
            on_notice=self._server_notice, begin_level=self._begin_level, end_level=self._end_level,
            on_batch=self._take, on_lost=self._lost, on_worker_lost=self._worker_lost,
            on_ready=self._workers_up,
        )  # fmt: skip
        self.workers = self._workers.count
        # Until `start` makes the run's store, snapshots and results read an empty one.
        store = new_store(self.options, time.perf_counter_ns(), self.workers, series_cap=IDLE_SERIES_CAP)
        self.core = RunCore(target, self.options, store, load, workers=self.workers)
        self._log: RequestsLogFile | None = None
        self._spans: Spans | None = None
        """A span per finished request to an OTLP collector (``options.otlp_endpoint``), or None."""
        self._started = False
        self._stopping = False
        self.stopped = False
        """True once `stop` has finished."""
        self._session: SessionRecorder | None = None
        self._session_path: Path | None = None
        self._session_lost: Lost | None = None
        self.ramp: RampVerdict | None = None
        """What the latest auto ramp said when it stopped (`record_ramp`), for results."""
        self._reset_refused = False
        """A refused cache reset has been said (once a run: each later one would say the same)."""
        self.record_listeners: list[Callable[[Sequence[RequestRecord]], None]] = []
        """Called with each batch's finished records on the reader thread, outside the lock (a live A/B
        keeps its samples so: `tui.engine.ab.pair`)."""

    # --- Engine protocol ------------------------------------------------------------------------

    load, level_id, model, fatal, t0_ns, server_view = RUN_READS

    def write_results(self, path: Path, *, interrupted: str | None = None) -> Path:
        return write_results(self.results(interrupted=interrupted), path)

    def start(self) -> None:
        """Begin: returns at once; the server check and worker start-up happen on a background thread."""
        with self._lock:
            if self._started:
                return
            self._started = True
            t0 = time.perf_counter_ns()
            self.core.started_at = time.time()
            self.core.store = new_store(self.options, t0, self.workers)
            self.core.level_id = 1
            self._open_session(t0)
            self._begin_level(1, self.core.load, t0)
            if self.core.load.paused:
                self._end_level(t0)
            if (placement := self._workers.placement(t0)) is not None:
                self._note(placement)
            if self.requests_log_path is not None:
                self._log = RequestsLogFile(self.requests_log_path)
            if self.options.otlp_endpoint is not None and self.options.trace_key:
                from tui.engine.telemetry.otlp import Spans

                self._spans = Spans(
                    self.options.otlp_endpoint, self.options.trace_key, base_url=self.target.base_url,
                    endpoint_kind=self.target.endpoint, on_notice=self._server_notice,
                )  # fmt: skip
                self._spans.model = self.core.model
        if self.options.server_metrics:
            session = self._session
            self.core.scrape.start(
                self.target,
                self.options,
                on_notice=self._server_notice,
                on_canary_record=self._canary_record,
                canary_words=self.workload.isl,
                on_scrape=session.scrape if session is not None else None,
            )
        self._workers.begin(self._run)

    def set_load(self, target: LoadTarget) -> None:
        """Set the target; a change of mode/value/arrival/cap, or a resume from pause, starts a new level."""
        with self._lock:
            old = self.core.load
            self.core.load = target
            if not self._started or self._stopping:
                return
            now = time.perf_counter_ns()
            if self._session is not None:
                self._session.load(now, target)
            new_level = False
            if target.paused:
                if not old.paused:
                    self._end_level(now)
            elif old.paused or _level_key(old) != _level_key(target):
                self.core.level_id += 1
                self._begin_level(self.core.level_id, target, now)
                new_level = True
            self._workers.trace.retarget(target, now, new_level=new_level)
            self._workers.send_shares(self.core)
            self._workers.reader.await_views(self.core.store)

    def reset_cache(self) -> ResetOutcome:
        """Ask the server to drop its prefix cache (`tui.engine.host.cache_reset`; blocking, seconds at
        most: call it off the UI thread), then, while load runs, open a fresh level at the same load, so
        the cold level is measured apart from the warm one. The session gets a mark; a refusal is a notice
        (once a run)."""
        view = self.core.scrape.latest()
        outcome = reset_prefix_cache(self.target, view.kind if view is not None else None)
        with self._lock:
            running = self._started and not self._stopping and not self.core.load.paused
            # the level it comes before: the fresh one opened below, the next one when paused; a refused
            # one while load runs is the running level's
            level_id = self.core.level_id if running and not outcome.done else self.core.level_id + 1
            self._after_reset(outcome, level_id)
            if not outcome.done or not running:
                return outcome
            now = time.perf_counter_ns()
            self.core.level_id += 1
            self._begin_level(self.core.level_id, self.core.load, now)
            self._workers.trace.retarget(self.core.load, now, new_level=True)
            self._workers.send_shares(self.core)
            self._workers.reader.await_views(self.core.store)
        return outcome

    def _after_reset(self, outcome: ResetOutcome, level_id: int) -> None:
        """Under the lock: the reset is kept for the results as ``level_id``'s; a done one marks the
        session; a refused one is a notice, once a run."""
        from tui.engine.results.level import CacheReset

        at_s = max(0.0, (time.perf_counter_ns() - self.core.store.t0_ns) / 1e9)
        # not rounded: the level it opens starts microseconds after (its `started_s` is not rounded either)
        self.core.resets[level_id] = CacheReset(
            at_s=at_s, done=outcome.done, refused=outcome.refused, line=outcome.line
        )
        if outcome.done:
            if self._session is not None:
                self._session.mark(time.perf_counter_ns(), "prefix cache dropped")
        elif not self._reset_refused:
            self._reset_refused = True
            self._note(outcome.line)

    def record_ramp(self, verdict: RampVerdict) -> None:
        """What the auto ramp said when it stopped: kept for results (the latest ramp's), and a notice."""
        with self._lock:
            self.ramp = verdict
            self._note(f"auto ramp stopped: {verdict.reason}")

    def _open_session(self, t0_ns: int) -> None:
        """Under the lock, at start: begin recording the run's session (``options.record``)."""
        from tui.engine.recording.recorder import open_recorder

        started_at_s = self.core.started_at or time.time()
        self._session, notice = open_recorder(
            self.options, target=self.target, workload=self.workload, load=self.core.load,
            workers=self.workers, t0_ns=t0_ns, started_at_s=started_at_s,
        )  # fmt: skip
        if self._session is not None:
            self._session_path = self._session.path
            self.core.store.on_views = self._session.views
        if notice is not None:
            self.core.store.add_notice(notice)

    @property
    def session_path(self) -> Path | None:
        """Where this run's session is being recorded, or None."""
        return self._session_path

    @property
    def session_lost(self) -> Lost | None:
        """What a failed write cost the session (a full disk...), once one did (a snapshot makes it a
        notice). Read without the lock: a face asks on every tick."""
        session = self._session
        return self._session_lost or (session.lost if session is not None else None)

    def _see_session_lost(self) -> None:
        """Under the lock: the session's first failed write becomes a notice (once)."""
        session = self._session
        if self._session_lost is None and session is not None and session.lost is not None:
            self._session_lost = session.lost
            self.core.store.add_notice(session.lost.line())

    def mark(self, label: str) -> None:
        """Add a mark with a short label to the session at this moment (shown by a replay)."""
        if self._session is not None:
            self._session.mark(time.perf_counter_ns(), label)

    def _begin_level(self, level_id: int, target: LoadTarget, t_ns: int) -> None:
        """Under the lock: a new level in the store, and in the session."""
        if self._session is not None:
            self._session.level("begin", t_ns, level_id, target)
        self.core.store.begin_level(level_id, target, t_ns)

    def _end_level(self, t_ns: int) -> None:
        """Under the lock: the current level ends, in the store and in the session."""
        if self._session is not None:
            self._session.level("end", t_ns)
        self.core.store.end_level(t_ns)

    def snapshot(self) -> Snapshot:
        """The state now, summarised from what the workers reported (cheap; never blocks on I/O).

        While the reader thread runs, it alone recomputes the costly views (`Store.refresh_views`) and this
        only reads the latest published ones, so a face calling it on its UI thread pays only for assembling
        them (about 1 ms rather than up to ~20 ms). Before the reader starts and after it ends, nobody else
        would, so this refreshes them when due; once stopped, never: the views `stop` computed last are the
        run's (the rolling windows would slide on, unrecorded, and its replay show other figures)."""
        with self._lock:
            now = time.perf_counter_ns()
            self._see_session_lost()
            if not self._workers.reader.owns_views and not self.stopped:
                self.core.store.refresh_views(now)
            return self.core.snapshot(now, self.workload)

    def detail(self, request_id: int) -> RequestDetail | None:
        """A recent or in-flight request's full record, or None if it is no longer kept."""
        with self._lock:
            return self.core.store.detail(request_id, time.perf_counter_ns())

    def results(self, *, interrupted: str | None = None) -> Results:
        """The results document, built from plain data (`tui.engine.results.collect`); ``interrupted`` says
        why the run was cut short ("quit", "SIGINT", ...), None when it finished."""
        with self._lock:
            info = self.run_info()
            interrupted = interrupted or self._workers.interrupted_by
            results = self.core.results(self.snapshot, info, interrupted=interrupted, ramp=self.ramp)
            ray = self._workers.ray
            return results if ray is None else ray.in_results(results, self.core.store.t0_ns)

    def run_info(self) -> RunInfo:
        """The run described as plain data for results (no secrets: see `config_record.run_info`)."""
        return self.core.run_info(self.workload, self.core.started_at or time.time())

    def _server_notice(self, message: str) -> None:
        """The poller's one line (metrics missing, log unwritable) joins the run's notices: shown, saved."""
        with self._lock:
            self._note(message)

    def _note(self, message: str) -> None:
        """Under the lock: a notice of the handle's own, in the store and in the session."""
        if self._session is not None:
            self._session.notice(time.perf_counter_ns(), message)
        self.core.store.add_notice(message)

    def stop(self, *, finish_in_flight: bool = False, timeout_s: float = 5.0) -> None:
        """Stop issuing, cancel (or let finish, up to ``timeout_s``) in-flight requests, join the workers,
        close the requests log, stop scraping. Idempotent."""
        self.core.scrape.stop()
        with self._lock:
            if self.stopped or not self._started:
                self.stopped = True
                return
            first = not self._stopping
            self._stopping = True
            if first:
                self._end_level(time.perf_counter_ns())
            self._workers.send_stop(finish_in_flight, timeout_s)
        self._workers.join(timeout_s)
        with self._lock:
            # every batch is in: the run's last views, which snapshots show from now on
            self.core.store.refresh_views(time.perf_counter_ns(), force=True)
            self._workers.close()
            if self._log is not None:
                error = self._log.close()
                self.core.fatal = self.core.fatal or error
                self._log = None
            spans, self._spans = self._spans, None
            self.stopped = True
        if spans is not None:
            spans.close()  # outside the lock: the last spans are given up to otlp.FLUSH_AT_END_S
        self._close_session()

    def _close_session(self) -> None:
        """After the workers are joined: the results and the end marker go into the session, which closes."""
        session, self._session = self._session, None
        if session is not None:
            from tui.engine.results.files import to_json

            session.finish(self.core.fatal, lambda: to_json(self.results()))
        if session is not None and session.lost is not None and self._session_lost is None:
            with self._lock:  # a full disk is a notice, not the run's fatal: the run went on
                self._session_lost = session.lost
                self.core.store.add_notice(session.lost.line())

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        """Block until the workers are started (or the start failed: see `fatal`)."""
        return self._workers.reader.ready.wait(timeout_s)

    # --- background thread ------------------------------------------------------------------------

    def _run(self) -> None:
        spawned = False
        try:
            try:
                probed = probe_models(self.target) if self._probe else Probed(self.target.model or "")
            except ProbeError as exc:
                self.core.fatal = str(exc)
                return
            model = probed.model
            self.core.model = model
            self._guard.model = model  # resolved: a 404 naming it says the server dropped it
            if self._spans is not None:
                self._spans.model = model
            if picked := probed.note(self.target.model):  # several served, none asked for: say which
                with self._lock:
                    self._note(f"model {model}: {picked}")
            if self._session is not None:
                self._session.model(time.perf_counter_ns(), model)
            if self.options.isl_probe and skip_reason(self.workload) is None:  # results say why not
                self._probe_isl(model)
            if self.workload.trace is not None:  # what the trace's own sharing may serve from the cache
                share = named_block_share(self.workload.trace)
                with self._lock:
                    self.core.cache.named_share = share
            if self.options.reset_cache:  # after the ISL probe's prompts: the run starts cold
                outcome = reset_prefix_cache(self.target)
                with self._lock:  # before the first request: the level the workers start in
                    paused = self.core.load.paused
                    self._after_reset(outcome, self.core.level_id + 1 if paused else self.core.level_id)
            with self._lock:
                if self._stopping:
                    return
                self._workers.spawn(self.target, self.workload, model, self.options)
                self._workers.send_shares(self.core)
                spawned = True
        except PoolError as exc:  # a Ray node cannot reach the target: its one line
            self.core.fatal = str(exc)
            return
        except Exception as exc:  # keep the face informed rather than dying silently
            self.core.fatal = f"engine failed to start: {type(exc).__name__}: {exc}"
            return
        finally:
            if not spawned:  # a failed start is ready too (see `fatal`); a good one once workers report
                self._workers.reader.ready.set()
        self._workers.read(self.core.store)

    def _probe_isl(self, model: str) -> None:
        """Learn what a prompt costs on this server before the workers start (`tui.engine.host.isl_probe`)."""
        probe = probe_isl(self.target, self.workload, model)
        with self._lock:
            self.workload = probe.workload
            now = time.perf_counter_ns()
            if self._session is not None:
                self._session.workload(now, probe.workload)
            if probe.notice is not None:
                if self._session is not None:
                    self._session.notice(now, probe.notice)
                self.core.store.add_notice(probe.notice)

    def _workers_up(self) -> None:
        """Every worker has reported (on the reader thread): a trace replay starts now, for all at once."""
        with self._lock:
            if self._stopping or self.workload.trace is None:
                return
            self._workers.trace.start(time.perf_counter_ns(), self.core.load)
            self._workers.send_shares(self.core)

    def trace_position_s(self) -> float:
        """Seconds into the trace the replay is now (0 outside a replay)."""
        with self._lock:
            return self._workers.trace.position_ns(time.perf_counter_ns()) / 1e9

    def _worker_lost(self, worker: int, lost: WorkerLost) -> None:
        """Worker ``worker``'s node went away (after all its batches that arrived): the store stops waiting
        for it, and `Workers.lose` applies the policy once the whole node is in."""
        cause = NODE_LOST_ERROR if lost.signal is None else f"engine worker {worker} killed by {lost.signal}"
        with self._lock:
            if self._session is not None:
                self._session.lose_workers(time.perf_counter_ns(), [worker], lost.at_ns, cause)
            in_flight, records = self.core.store.lose_workers([worker], lost.at_ns, cause)
            log, spans = self._log, self._spans
            self._workers.lose(worker, lost, in_flight, self.core, stopping=self._stopping)
        if log is not None and records:
            log.write(records)
        if spans is not None and records:
            spans.add(records)

    def _lost(self, message: str) -> None:
        """A worker failed or its pipe closed: the engine's fatal line, unless it is stopping anyway."""
        if not self._stopping and self.core.fatal is None:
            self.core.fatal = message

    def _canary_record(self, record: RequestRecord) -> None:
        """A finished canary request: into the requests log and a span of its own, marked the canary's
        (never the store: no level counts it)."""
        with self._lock:
            log, spans = self._log, self._spans
        error = log.write_canary(record) if log is not None else None
        if error is not None and not self._stopping:
            self.core.fatal = error
        if spans is not None:
            spans.add((record,), canary=True)

    def _take(self, batch: Batch) -> None:
        """A worker's batch: into the store and the requests log; the guard or the store may halt the load."""
        with self._lock:
            if self._session is not None:
                self._session.batch(batch)
            records = self.core.store.ingest(batch)
            log, spans = self._log, self._spans
            # the guard's rejected key or certificate, or the store's "every request fails" with a non-429
            # 4xx (a wrong URL, path or model): every further request repeats it
            reason = self._guard.see(records) or (
                self.core.store.fatal if self.core.store.fatal_halts else None
            )
            if reason is not None and not self._stopping:
                self._workers.halt(self.core, reason)
        error = log.write(records) if log is not None else None
        if error is not None and not self._stopping:
            self.core.fatal = error
        if spans is not None and records:
            spans.add(records)
        for listener in self.record_listeners if records else ():
            listener(records)


if TYPE_CHECKING:

    def _implements_engine(handle: EngineHandle) -> Engine:
        return handle  # mypy checks EngineHandle against the Engine protocol here
