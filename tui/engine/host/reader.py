"""The engine's reader thread: it waits on every worker's data pipe, decodes their typed messages and hands
each batch on, and between messages keeps the store's costly views published for snapshots to read.

It also holds what the face's threads wait on: `ready` (every worker still running has been heard from),
`published` (fresh views are out) and a wake pipe that has it publish at once (a level began or ended).
The batches' records go to the run's ``--requests-log`` from here too (`RequestsLogFile`).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path

from tui.engine.aggregate.store import Store
from tui.engine.records import RequestRecord, RequestsLog
from tui.engine.wire import Batch, Goodbye, WorkerFailed, WorkerLost, WorkerMessage

REFRESH_POLL_S = 0.1
"""The reader thread wakes at least this often, to refresh the store's costly views when due."""
EXIT_CODE_WAIT_S = 0.5
"""How long a worker whose pipe closed is given to be reaped, so its exit code (a signal) is known."""
LEVEL_VIEWS_WAIT_S = 0.5
"""After a level change, `await_views` waits at most this long for the reader to publish the new views."""


def signal_name(number: int) -> str:
    """ "SIGKILL" for 9; "signal 64" for a number with no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Reader:
    """The reader's side of the handle; `run` is the thread's body, the rest is called from any thread."""

    def __init__(
        self,
        lock: threading.RLock,
        *,
        on_batch: Callable[[Batch], None],
        on_lost: Callable[[str], None],
        exitcode: Callable[[int], int | None],
        on_worker_lost: Callable[[int, WorkerLost], None] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        """``on_batch`` gets each batch; ``on_lost`` one line for a worker that failed or exited unexpectedly
        (``exitcode(i)`` names worker i's exit code); ``on_ready`` once every worker has reported. All are
        called on the reader thread."""
        self._on_batch = on_batch
        self._on_lost = on_lost
        self._exitcode = exitcode
        self._on_worker_lost = on_worker_lost
        """Gets worker i's `WorkerLost` (its node went away), after every batch of it that arrived."""
        self._on_ready = on_ready
        self.published = threading.Condition(lock)
        """Notified (under the engine's lock) whenever the reader has refreshed the store's views."""
        self.ready = threading.Event()
        """Set once every worker still running has sent something, or the start failed, or all are gone."""
        self.owns_views = False
        """The reader is reading batches and keeps the store's costly views fresh (`Store.refresh_views`);
        before it starts and once it has ended, snapshots refresh them. Read and written under the lock."""
        self._wake_r = self._wake_w = -1

    def open_wake(self) -> None:
        """Make the wake pipe (non-blocking both ends), before the thread starts."""
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def await_views(self, store: Store) -> None:
        """Under the lock, after a level began or ended: while the reader owns the views, wake it and wait
        (bounded) until it has published them, so the next snapshot already shows the change, as it did
        when snapshots computed them; the reader computes, the caller only waits."""
        if store.views_current or not self.owns_views:
            return
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"\0")
        self.published.wait_for(
            lambda: store.views_current or not self.owns_views, timeout=LEVEL_VIEWS_WAIT_S
        )

    def close_wake(self) -> None:
        """Close the wake pipe, once the thread has ended."""
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def run(self, conns: Sequence[Connection], store: Store) -> None:
        """Drain ``conns`` (worker i's data pipe at index i) until every worker has said goodbye or gone,
        refreshing ``store``'s views between messages."""
        with self.published:
            self.owns_views = True
        try:
            self._read_batches(conns, store)
        finally:
            self.ready.set()  # the workers are gone before they all reported: nothing left to wait for
            with self.published:
                self.owns_views = False
                self.published.notify_all()

    def _exit_code(self, i: int) -> int | None:
        """Worker i's exit code, waiting a moment for it: its pipe closes as it dies, a little before the
        process can be reaped."""
        deadline = time.monotonic() + EXIT_CODE_WAIT_S
        while (code := self._exitcode(i)) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return code

    def _read_batches(self, conns: Sequence[Connection], store: Store) -> None:
        open_conns = {id(c): i for i, c in enumerate(conns)}
        pending = list(conns)
        silent = set(open_conns)
        """Workers not heard from yet: `ready` is set once every one has sent something (a worker process
        takes a second or more to start on a busy machine: a 1 s bench level timed from its spawn could end
        before it sent a request)."""
        while pending:
            if not self.ready.is_set() and not silent & {id(c) for c in pending}:
                self.ready.set()  # every worker still running has reported
                if self._on_ready is not None:
                    self._on_ready()
            with self.published:
                store.refresh_views(time.perf_counter_ns())
                self.published.notify_all()
            for conn in wait([*pending, self._wake_r], timeout=REFRESH_POLL_S):
                if conn == self._wake_r:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_r, 4096)
                    continue
                assert isinstance(conn, Connection)
                try:
                    raw = conn.recv_bytes()
                except (EOFError, OSError):
                    pending.remove(conn)
                    i = open_conns[id(conn)]
                    code = self._exit_code(i)
                    if code is not None and code < 0 and self._on_worker_lost is not None:
                        # killed (the OOM killer, kill -9): lost like a node, its in-flight requests with it
                        at_ns = time.perf_counter_ns()
                        self._on_worker_lost(i, WorkerLost(f"worker {i}", at_ns, (i,), signal_name(-code)))
                    else:
                        self._on_lost(f"engine worker {i} exited unexpectedly (exit code {code})")
                    continue
                msg: WorkerMessage = pickle.loads(raw)
                silent.discard(id(conn))
                if isinstance(msg, Goodbye):
                    pending.remove(conn)
                elif isinstance(msg, WorkerLost):
                    pending.remove(conn)
                    if self._on_worker_lost is not None:
                        self._on_worker_lost(open_conns[id(conn)], msg)
                elif isinstance(msg, WorkerFailed):
                    self._on_lost(f"engine worker {open_conns[id(conn)]} failed: {msg.message}")
                else:
                    self._on_batch(msg)


class RequestsLogFile:
    """The run's ``--requests-log`` file: one JSON line per finished request, appended by the reader thread
    and closed (so flushed) at stop. Its first failure (a full disk) is one line for the face to show; after
    it the log takes nothing more and the load goes on. Opened for appending at once: a path that cannot be
    opened fails the engine's `start`."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "ab")  # noqa: SIM115 - closed in close()
        self._log: RequestsLog | None = RequestsLog(self._file)

    def write(self, records: Sequence[RequestRecord]) -> str | None:
        """Append ``records``; the one-line reason the first time writing fails (also when the file was
        closed meanwhile), else None."""
        log = self._log
        if log is None:
            return None
        try:
            for rec in records:
                log.write(rec)
        except (OSError, ValueError) as exc:
            self._log = None
            return f"cannot write the requests log: {exc}"
        return None

    def write_canary(self, record: RequestRecord) -> str | None:
        """Append a canary request's line (`tui.engine.host.canary`), marked ``"canary": true`` (its level 0
        is none of the load's); the reason the first time writing fails, else None."""
        log = self._log
        if log is None:
            return None
        try:
            log.write_json({**record.to_json(), "canary": True})
        except (OSError, ValueError) as exc:
            self._log = None
            return f"cannot write the requests log: {exc}"
        return None

    def close(self) -> str | None:
        """Close the file (it flushes: that may fail on a full disk); the one-line reason, or None."""
        self._log = None
        try:
            self._file.close()
        except OSError as exc:
            return f"cannot write the requests log: {exc}"
        return None
