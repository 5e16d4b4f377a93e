"""`Workers`: the handle's hold on its worker processes (the pool, the reader thread, the trace's clock, the
shares, lost nodes, the halt). Apart from `handle` so the handle speaks for the run (levels, session, notices,
results) while this speaks to the workers; the handle holds one and calls it under its lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.pool import LostNodes, Pool, PoolError, lost_line, placement_line
from tui.engine.host.reader import Reader
from tui.engine.host.trace_clock import TraceClock
from tui.engine.host.worker_pool import WorkerPool, ensure_resource_tracker
from tui.engine.load.split import split_load
from tui.engine.wire import ApplyShare, Batch, Stop, WorkerLost, WorkerSpec

if TYPE_CHECKING:
    from tui.engine.aggregate.store import Store
    from tui.engine.host.ray_pool import RayWorkerPool
    from tui.engine.host.run_core import RunCore


class Workers:
    """The workers of one run: local processes, or Ray actors with ``options.placement``."""

    def __init__(
        self,
        options: EngineOptions,
        workers: int,
        lock: threading.RLock,
        *,
        seed: int,
        on_notice: Callable[[str], None],
        begin_level: Callable[[int, LoadTarget, int], None],
        end_level: Callable[[int], None],
        on_batch: Callable[[Batch], None],
        on_lost: Callable[[str], None],
        on_worker_lost: Callable[[int, WorkerLost], None],
        on_ready: Callable[[], None],
    ) -> None:
        """The callbacks are the handle's: a notice, a level begun or ended (in its store and session), and
        the reader thread's (`tui.engine.host.reader.Reader`). `PoolError` says in one line why Ray workers
        cannot be placed."""
        self.count = max(1, workers)
        self._seed = seed
        self._on_node_loss = (
            options.placement.on_node_loss if options.placement is not None else options.on_worker_loss
        )
        self._note = on_notice
        self._begin_level = begin_level
        self._end_level = end_level
        self.ray: RayWorkerPool | None = None
        self.pool: Pool = WorkerPool()
        if options.placement is not None:
            try:
                from tui.engine.host.ray_pool import RayWorkerPool
            except ImportError as exc:
                raise PoolError(f"--ray needs Ray: pip install 'tokentop[ray]' ({exc})") from exc

            self.ray = RayWorkerPool(options.placement, self.count, on_notice=on_notice)
            self.pool = self.ray
            self.count = self.ray.workers
        self.reader = Reader(
            lock,
            on_batch=on_batch,
            on_lost=on_lost,
            exitcode=self.pool.exitcode,
            on_worker_lost=on_worker_lost,
            on_ready=on_ready,
        )
        self.trace = TraceClock()
        """The trace replay's timeline (used in the ``trace`` mode only)."""
        self.lost_nodes = LostNodes()
        self.halted = False
        """Set by `halt`: every worker is paused and stays so whatever the load says."""
        self.interrupted_by: str | None = None
        """"node_lost" once a lost node stopped the run."""
        self._thread: threading.Thread | None = None

    def placement(self, t0_ns: int) -> str | None:
        """Where the Ray workers were placed, in one line (None for local workers)."""
        return placement_line(self.ray.nodes(t0_ns)) if self.ray is not None else None

    def begin(self, run: Callable[[], None]) -> None:
        """Start the background thread: ``run`` checks the server, calls `spawn`, then `read`."""
        ensure_resource_tracker()
        self.reader.open_wake()
        self._thread = threading.Thread(target=run, name="tokentop-engine-reader", daemon=True)
        self._thread.start()

    def spawn(
        self, target: TargetConfig, workload: WorkloadConfig, model: str, options: EngineOptions
    ) -> None:
        w = self.count
        self.pool.spawn(WorkerSpec(i, w, target, workload, model, options) for i in range(w))

    def read(self, store: Store) -> None:
        """On the background thread, until every worker is gone: their batches into ``store``."""
        self.reader.run(self.pool.data, store)

    def send_shares(self, core: RunCore) -> None:
        """The load split over the workers still running (all of them unless a node was lost)."""
        load = replace(core.load, paused=True) if self.halted else core.load
        alive = [i for i in range(self.count) if i not in core.store.lost_workers]
        shares = split_load(
            load, max(1, len(alive)), core.level_id, seed=self._seed, trace=self.trace.place()
        )
        if len(alive) == self.count:
            self.pool.send_each(ApplyShare(share) for share in shares)
            return
        idle = ApplyShare(replace(shares[0], paused=True))
        commands = [idle] * self.count
        for share, i in zip(shares, alive, strict=False):
            commands[i] = ApplyShare(share)
        self.pool.send_each(commands)

    def halt(self, core: RunCore, reason: str) -> None:
        """Under the lock: stop issuing in every worker at once (paused shares through the wire; in-flight
        requests end on their own) and report ``reason`` as the engine's fatal condition, for every face."""
        if self.halted:
            return
        self.halted = True
        core.fatal = core.fatal or reason
        if not core.load.paused:
            self._end_level(time.perf_counter_ns())
        self.send_shares(core)

    def lose(self, worker: int, lost: WorkerLost, in_flight: int, core: RunCore, *, stopping: bool) -> None:
        """Under the lock: worker ``worker``'s node went away with ``in_flight`` requests of it. Once every
        worker of ``lost.node`` is in, one line, and the policy: stop the run, or split the load over the
        survivors as a new level."""
        node_in_flight = self.lost_nodes.add(worker, lost, in_flight)
        if node_in_flight is None:
            return
        line = lost_line(lost, node_in_flight, self.count, core.level_id, core.store.t0_ns)
        self._note(line)
        if stopping:
            return
        survivors = self.count - len(core.store.lost_workers)
        if self._on_node_loss == "stop" or survivors == 0:
            self.interrupted_by = "node_lost"
            core.fatal = core.fatal or line
            self._end_level(lost.at_ns)
            return
        if not core.load.paused:
            core.level_id += 1
            self._begin_level(core.level_id, core.load, time.perf_counter_ns())
            self._note(f"load re-split over {survivors} workers as level {core.level_id}")
        self.send_shares(core)

    def send_stop(self, finish_in_flight: bool, timeout_s: float) -> None:
        """Under the lock: every worker stops issuing (and cancels, or finishes, its in-flight requests)."""
        self.pool.send_all(Stop(finish_in_flight, timeout_s))

    def join(self, timeout_s: float) -> None:
        """Not under the lock (the reader takes it): the reader thread and the workers end."""
        if self._thread is not None:
            self._thread.join(timeout_s + 5.0)
        self.pool.join()

    def close(self) -> None:
        """Under the lock, after `join`: the pool's pipes, and the reader's wake pipe once it has ended."""
        self.pool.close()
        if self._thread is None or not self._thread.is_alive():
            self.reader.close_wake()
