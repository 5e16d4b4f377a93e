"""`EngineHandle`: the face's side of the engine. Commands in, snapshots out; the load runs elsewhere.

The handle lives in the face's process (the app or the bench). `start()` returns at once; a background thread
checks the server (`/v1/models`, also resolving the model name), spawns the worker processes (``spawn``
context: the app has threads, so no fork), sends each its share of the load, and then reads their batches
into a bounded `Store` and the requests log. What crosses the pipes is typed in `tui.engine.wire` (a
`WorkerSpec` to start, `ApplyShare`/`Stop` in, `Batch`/`WorkerFailed`/`Goodbye` out). `snapshot()` summarises
the store with numpy on demand. Its parts, one module each beside it: `reader` (the receive loop and the
requests log), `worker_pool` (local processes) or `ray_pool` behind `pool`, `server_scrape`, and
`config_record` (the configs as the results record them); its decisions are `tui.engine.control`.

Workers are started with multiprocessing's ``spawn``, which re-imports the face's main module in each
worker: a script that creates an `EngineHandle` must keep its top level behind
``if __name__ == "__main__":`` (``tokentop``, ``python -m tui`` and pytest already do).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.engine.aggregate.series import IDLE_SERIES_CAP
from tui.engine.aggregate.store import Store
from tui.engine.api import Engine
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.control.checks import CacheCheck, LengthCheck
from tui.engine.control.guard import ConfigGuard
from tui.engine.host.isl_probe import probe_isl, skip_reason
from tui.engine.host.pool import LostNodes, Pool, PoolError, lost_line, placement_line
from tui.engine.host.probe import ProbeError, probe_server
from tui.engine.host.reader import Reader, RequestsLogFile
from tui.engine.host.server_scrape import ServerScrape
from tui.engine.host.trace_clock import TraceClock
from tui.engine.host.worker_pool import WorkerPool, ensure_resource_tracker
from tui.engine.load.runner import split_load
from tui.engine.redact import display_url
from tui.engine.snapshot import LevelView, RampVerdict, RequestDetail, Snapshot
from tui.engine.traces.sharing import named_block_share
from tui.engine.wire import ApplyShare, Batch, Stop, WorkerLost, WorkerSpec

if TYPE_CHECKING:
    from tui.engine.host.ray_pool import RayWorkerPool
    from tui.engine.results.build import RunInfo
    from tui.engine.results.model import Results
    from tui.engine.server_metrics import ServerView
    from tui.engine.sessions.recorder import SessionRecorder


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
        self.workers = max(1, workers)
        self.requests_log_path = requests_log
        self.options = options or EngineOptions()
        self._load = load
        self._level_id = 0
        self._lock = threading.RLock()
        # Until `start` makes the run's store, snapshots and results read an empty one.
        self._store = self._new_store(time.perf_counter_ns(), series_cap=IDLE_SERIES_CAP)
        self._model = target.model or ""
        self._fatal: str | None = None
        self._guard = ConfigGuard(has_key=bool(target.api_key))
        self._halted = False
        """Set when the guard tripped: every worker is paused and stays so whatever `set_load` says."""
        self._ray: RayWorkerPool | None = None
        self._pool: Pool = WorkerPool()
        if self.options.placement is not None:
            try:
                from tui.engine.host.ray_pool import RayWorkerPool
            except ImportError as exc:
                raise PoolError(f"--ray needs Ray: pip install 'tokentop[ray]' ({exc})") from exc

            self._ray = RayWorkerPool(self.options.placement, self.workers, on_notice=self._server_notice)
            self._pool = self._ray
            self.workers = self._ray.workers
        self._lost_nodes = LostNodes()
        self._interrupted_by: str | None = None
        self._reader = Reader(
            self._lock,
            on_batch=self._take,
            on_lost=self._lost,
            exitcode=self._pool.exitcode,
            on_worker_lost=self._worker_lost,
            on_ready=self._workers_up,
        )
        self._trace = TraceClock()
        """The trace replay's timeline (used in the ``trace`` mode only)."""
        self._thread: threading.Thread | None = None
        self._log: RequestsLogFile | None = None
        self._started = False
        self._lengths = LengthCheck()
        self._cache = CacheCheck()
        self._stopping = False
        self._stopped = False
        self._scrape = ServerScrape()
        self._session: SessionRecorder | None = None
        self._session_path: Path | None = None
        self.started_at: float | None = None
        """Wall-clock start (``time.time()``), for results."""
        self.ramp: RampVerdict | None = None
        """What the latest auto ramp said when it stopped (`record_ramp`), for results."""

    def _new_store(self, t0_ns: int, *, series_cap: int | None = None) -> Store:
        o = self.options
        return Store(
            t0_ns,
            self.workers,
            slo_ttft_ms=o.slo_ttft_ms,
            slo_tpot_ms=o.slo_tpot_ms,
            lag_threshold_ms=o.lag_threshold_ms,
            cpu_threshold=o.cpu_threshold,
            max_lanes=o.max_lanes,
            series_cap=series_cap,
        )

    # --- Engine protocol ------------------------------------------------------------------------

    @property
    def load(self) -> LoadTarget:
        """The current target."""
        return self._load

    @property
    def t0_ns(self) -> int:
        """The run's zero (``perf_counter_ns``); snapshot times in seconds are relative to it."""
        return self._store.t0_ns

    @property
    def stopped(self) -> bool:
        """True once `stop` has finished."""
        return self._stopped

    def server_view(self) -> ServerView | None:
        """The server's own signals as last scraped from its ``/metrics``, or None when not scraping."""
        return self._scrape.latest()

    def write_results(self, path: Path, *, interrupted: str | None = None) -> Path:
        """Write `results` atomically (a crash never leaves half a file); ``interrupted`` as in `results`."""
        from tui.engine.results.files import write_results

        return write_results(self.results(interrupted=interrupted), Path(path))

    def start(self) -> None:
        """Begin: returns at once; the server check and worker start-up happen on a background thread."""
        with self._lock:
            if self._started:
                return
            self._started = True
            t0 = time.perf_counter_ns()
            self.started_at = time.time()
            self._store = self._new_store(t0)
            self._level_id = 1
            self._open_session(t0)
            self._begin_level(1, self._load, t0)
            if self._load.paused:
                self._end_level(t0)
            if self._ray is not None:
                self._note(placement_line(self._ray.nodes(t0)))
            if self.requests_log_path is not None:
                self._log = RequestsLogFile(self.requests_log_path)
        if self.options.server_metrics:
            session = self._session
            self._scrape.start(
                self.target,
                self.options,
                on_notice=self._server_notice,
                on_canary_record=self._canary_record,
                canary_words=self.workload.isl,
                on_scrape=session.scrape if session is not None else None,
            )
        ensure_resource_tracker()
        self._reader.open_wake()
        self._thread = threading.Thread(target=self._run, name="tokentop-engine-reader", daemon=True)
        self._thread.start()

    def set_load(self, target: LoadTarget) -> None:
        """Set the target; a change of mode/value/arrival/cap, or a resume from pause, starts a new level."""
        with self._lock:
            old = self._load
            self._load = target
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
                self._level_id += 1
                self._begin_level(self._level_id, target, now)
                new_level = True
            self._trace.retarget(target, now, new_level=new_level)
            self._send_shares()
            self._reader.await_views(self._store)

    def record_ramp(self, verdict: RampVerdict) -> None:
        """What the auto ramp said when it stopped: kept for results (the latest ramp's), and a notice."""
        with self._lock:
            self.ramp = verdict
            self._note(f"auto ramp stopped: {verdict.reason}")

    def _open_session(self, t0_ns: int) -> None:
        """Under the lock, at start: begin recording the run's session (``options.record``); a session that
        cannot be created is a notice, and the run goes on unrecorded."""
        if self.options.record is None:
            return
        from tui.engine.sessions.recorder import SessionRecorder

        try:
            self._session = SessionRecorder(
                Path(self.options.record),
                target=self.target,
                workload=self.workload,
                load=self._load,
                options=self.options,
                workers=self.workers,
                t0_ns=t0_ns,
                started_at_s=self.started_at or time.time(),
            )
            self._session_path = self._session.path
            self._store.on_views = self._session.views
        except OSError as exc:
            self._store.add_notice(f"cannot record the session {self.options.record}: {exc.strerror or exc}")

    @property
    def session_path(self) -> Path | None:
        """Where this run's session is being recorded, or None."""
        return self._session_path

    def mark(self, label: str) -> None:
        """Add a mark with a short label to the session at this moment (shown by a replay)."""
        if self._session is not None:
            self._session.mark(time.perf_counter_ns(), label)

    def _begin_level(self, level_id: int, target: LoadTarget, t_ns: int) -> None:
        """Under the lock: a new level in the store, and in the session."""
        if self._session is not None:
            self._session.level("begin", t_ns, level_id, target)
        self._store.begin_level(level_id, target, t_ns)

    def _end_level(self, t_ns: int) -> None:
        """Under the lock: the current level ends, in the store and in the session."""
        if self._session is not None:
            self._session.level("end", t_ns)
        self._store.end_level(t_ns)

    @property
    def level_id(self) -> int:
        """The current load level's id (a new one for each change of target or resume)."""
        return self._level_id

    @property
    def model(self) -> str:
        """The model in use ("" until resolved from /v1/models)."""
        return self._model

    @property
    def fatal(self) -> str | None:
        """Why the engine cannot go on (one line), or None."""
        return self._fatal or self._store.fatal

    def snapshot(self) -> Snapshot:
        """The state now, summarised from what the workers reported (cheap; never blocks on I/O).

        While the reader thread runs, it alone recomputes the costly views (`Store.refresh_views`) and this
        only reads the latest published ones, so a face calling it on its UI thread pays only for assembling
        them (about 1 ms rather than up to ~20 ms). Before the reader starts and after it ends (the final
        results after `stop`), nobody else would, so this refreshes them when due."""
        with self._lock:
            now = time.perf_counter_ns()
            if not self._reader.owns_views:
                self._store.refresh_views(now)
            snap = self._store.snapshot(
                now,
                base_url=display_url(self.target.base_url),
                model=self._model,
                endpoint=self.target.endpoint,
                demo=self.target.demo,
                load=self._load,
                level_id=self._level_id,
                fatal=self._fatal,
            )
            self._flag_lengths(snap.levels)
            self._scrape.keep_level_summaries(snap.levels, self._store.t0_ns, now)
            return replace(
                snap,
                notices=self._store.notices_with(snap.levels),
                recent_errors=tuple(self._store.recent_errors),
            )

    def _flag_lengths(self, levels: Sequence[LevelView]) -> None:
        """Under the lock: a level off its asked lengths gets one notice, and synthetic prompts served from
        the prefix cache one for the run (`tui.engine.control.checks`)."""
        for message in self._lengths.notices(levels, self.workload) + self._cache.notices(
            levels, self.workload
        ):
            self._store.add_notice(message)

    def detail(self, request_id: int) -> RequestDetail | None:
        """A recent or in-flight request's full record, or None if it is no longer kept."""
        with self._lock:
            return self._store.detail(request_id, time.perf_counter_ns())

    def results(self, *, interrupted: str | None = None) -> Results:
        """The results document, built from plain data (`tui.engine.results.live`); ``interrupted`` says
        why the run was cut short ("quit", "SIGINT", ...), None when it finished."""
        from tui.engine.results.live import collect_results

        with self._lock:
            results = collect_results(
                self._store,
                self.snapshot,
                self.run_info(),
                self._scrape,
                interrupted=interrupted or self._interrupted_by,
                ramp=self.ramp,
            )
            if self._ray is not None:
                p = self._ray.placement
                placement = {"ray": p.address, "per_node": p.per_node, "on_node_loss": p.on_node_loss}
                nodes = tuple(n.as_dict() for n in self._ray.nodes(self._store.t0_ns))
                results = replace(
                    results,
                    config=replace(results.config, placement=placement),
                    client=replace(results.client, nodes=nodes),
                )
            return results

    def run_info(self) -> RunInfo:
        """The run described as plain data for results (no secrets: see `config_record.run_info`)."""
        from tui.engine.host.config_record import run_info

        return run_info(
            self.target,
            self.workload,
            self._load,
            options=self.options,
            workers=self.workers,
            model=self._model,
            started_at_s=self.started_at or time.time(),
        )

    def _server_notice(self, message: str) -> None:
        """The poller's one line (metrics missing, log unwritable) joins the run's notices: shown, saved."""
        with self._lock:
            self._note(message)

    def _note(self, message: str) -> None:
        """Under the lock: a notice of the handle's own, in the store and in the session."""
        if self._session is not None:
            self._session.notice(time.perf_counter_ns(), message)
        self._store.add_notice(message)

    def stop(self, *, finish_in_flight: bool = False, timeout_s: float = 5.0) -> None:
        """Stop issuing, cancel (or let finish, up to ``timeout_s``) in-flight requests, join the workers,
        close the requests log, stop scraping. Idempotent."""
        self._scrape.stop()
        with self._lock:
            if self._stopped or not self._started:
                self._stopped = True
                return
            first = not self._stopping
            self._stopping = True
            if first:
                self._end_level(time.perf_counter_ns())
            self._pool.send_all(Stop(finish_in_flight, timeout_s))
        if self._thread is not None:
            self._thread.join(timeout_s + 5.0)
        self._pool.join()
        with self._lock:
            self._pool.close()
            if self._thread is None or not self._thread.is_alive():
                self._reader.close_wake()
            if self._log is not None:
                error = self._log.close()
                self._fatal = self._fatal or error
                self._log = None
            self._stopped = True
        self._close_session()

    def _close_session(self) -> None:
        """After the workers are joined: the results and the end marker go into the session, which closes."""
        session, self._session = self._session, None
        if session is None:
            return
        if self._fatal:
            session.fatal(time.perf_counter_ns(), self._fatal)
        try:
            from tui.engine.results.files import to_json

            session.results(to_json(self.results()))
        finally:
            session.close()
        if session.error is not None:
            self._fatal = self._fatal or session.error

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        """Block until the workers are started (or the start failed: see `fatal`)."""
        return self._reader.ready.wait(timeout_s)

    # --- background thread ------------------------------------------------------------------------

    def _run(self) -> None:
        spawned = False
        try:
            try:
                model = probe_server(self.target) if self._probe else self.target.model or ""
            except ProbeError as exc:
                self._fatal = str(exc)
                return
            self._model = model
            if self._session is not None:
                self._session.model(time.perf_counter_ns(), model)
            if self.options.isl_probe and skip_reason(self.workload) is None:  # results say why not
                self._probe_isl(model)
            if self.workload.trace is not None:  # what the trace's own sharing may serve from the cache
                share = named_block_share(self.workload.trace)
                with self._lock:
                    self._cache.named_share = share
            with self._lock:
                if self._stopping:
                    return
                w = self.workers
                self._pool.spawn(
                    WorkerSpec(i, w, self.target, self.workload, model, self.options) for i in range(w)
                )
                self._send_shares()
                spawned = True
        except PoolError as exc:  # a Ray node cannot reach the target: its one line
            self._fatal = str(exc)
            return
        except Exception as exc:  # keep the face informed rather than dying silently
            self._fatal = f"engine failed to start: {type(exc).__name__}: {exc}"
            return
        finally:
            if not spawned:  # a failed start is ready too (see `fatal`); a good one once workers report
                self._reader.ready.set()
        self._reader.run(self._pool.data, self._store)

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
                self._store.add_notice(probe.notice)

    def _workers_up(self) -> None:
        """Every worker has reported (on the reader thread): a trace replay starts now, for all at once."""
        with self._lock:
            if self._stopping or self.workload.trace is None:
                return
            self._trace.start(time.perf_counter_ns(), self._load)
            self._send_shares()

    def trace_position_s(self) -> float:
        """Seconds into the trace the replay is now (0 outside a replay)."""
        with self._lock:
            return self._trace.position_ns(time.perf_counter_ns()) / 1e9

    def _send_shares(self) -> None:
        """The load split over the workers still running (all of them unless a node was lost)."""
        load = replace(self._load, paused=True) if self._halted else self._load
        alive = [i for i in range(self.workers) if i not in self._store.lost_workers]
        shares = split_load(
            load, max(1, len(alive)), self._level_id, seed=self.workload.seed, trace=self._trace.place()
        )
        if len(alive) == self.workers:
            self._pool.send_each(ApplyShare(share) for share in shares)
            return
        idle = ApplyShare(replace(shares[0], paused=True))
        commands = [idle] * self.workers
        for share, i in zip(shares, alive, strict=False):
            commands[i] = ApplyShare(share)
        self._pool.send_each(commands)

    def _worker_lost(self, worker: int, lost: WorkerLost) -> None:
        """Worker ``worker``'s node went away (after all its batches that arrived): the store stops waiting
        for it; once every worker of that node is in, one line, and the policy: stop the run, or split the
        load over the survivors as a new level."""
        with self._lock:
            if self._session is not None:
                self._session.lose_workers(time.perf_counter_ns(), [worker], lost.at_ns)
            in_flight, records = self._store.lose_workers([worker], lost.at_ns)
            log = self._log
            node_in_flight = self._lost_nodes.add(worker, lost, in_flight)
            if node_in_flight is not None:
                self._node_lost(lost, node_in_flight)
        if log is not None and records:
            log.write(records)

    def _node_lost(self, lost: WorkerLost, in_flight: int) -> None:
        """Under the lock: every worker of ``lost.node`` is accounted for."""
        line = lost_line(lost, in_flight, self.workers, self._level_id, self._store.t0_ns)
        self._note(line)
        if self._stopping:
            return
        survivors = self.workers - len(self._store.lost_workers)
        policy = self.options.placement.on_node_loss if self.options.placement is not None else "stop"
        if policy == "stop" or survivors == 0:
            self._interrupted_by = "node_lost"
            self._fatal = self._fatal or line
            self._end_level(lost.at_ns)
            return
        if not self._load.paused:
            self._level_id += 1
            self._begin_level(self._level_id, self._load, time.perf_counter_ns())
            self._note(f"load re-split over {survivors} workers as level {self._level_id}")
        self._send_shares()

    def _lost(self, message: str) -> None:
        """A worker failed or its pipe closed: the engine's fatal line, unless it is stopping anyway."""
        if not self._stopping and self._fatal is None:
            self._fatal = message

    def _canary_record(self, record: dict[str, Any]) -> None:
        """A finished canary request's line: into the requests log only (never the store: no level counts
        it)."""
        with self._lock:
            log = self._log
        error = log.write_canary(record) if log is not None else None
        if error is not None and not self._stopping:
            self._fatal = error

    def _take(self, batch: Batch) -> None:
        """A worker's batch: into the store and the requests log; the guard or the store may halt the load."""
        with self._lock:
            if self._session is not None:
                self._session.batch(batch)
            records = self._store.ingest(batch)
            log = self._log
            # the guard's rejected key or certificate, or the store's "every request fails" with a non-429
            # 4xx (a wrong URL, path or model): every further request repeats it
            reason = self._guard.see(records) or (self._store.fatal if self._store.fatal_halts else None)
            if reason is not None:
                self._halt(reason)
        error = log.write(records) if log is not None else None
        if error is not None and not self._stopping:
            self._fatal = error

    def _halt(self, reason: str) -> None:
        """Under the lock: stop issuing in every worker at once (paused shares through the wire; in-flight
        requests end on their own) and report ``reason`` as the engine's fatal condition, for every face."""
        if self._halted or self._stopping:
            return
        self._halted = True
        self._fatal = self._fatal or reason
        if not self._load.paused:
            self._end_level(time.perf_counter_ns())
        self._send_shares()


if TYPE_CHECKING:

    def _implements_engine(handle: EngineHandle) -> Engine:
        return handle  # mypy checks EngineHandle against the Engine protocol here
