"""The worker processes one engine started, and the two pipes to each: commands out, messages in. Sending,
joining and closing in one place, so the handle speaks of "the workers" and never of a process or a pipe.

Each is started with multiprocessing's ``spawn`` context, set up so it works under a running Textual app
(which has threads, so no fork, and a captured sys.stderr)."""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
from collections.abc import Iterable
from multiprocessing.connection import Connection
from typing import Any

from tui.engine.wire import Command, WorkerSpec


def ensure_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now, on the caller's thread (~20 ms, once per process).

    ``spawn`` starts it lazily and hands it ``sys.stderr.fileno()``; under a running Textual app sys.stderr
    is a capture object without a usable descriptor, and the first spawn fails with "bad value(s) in
    fds_to_keep". Starting it here, with the real stderr put back for the moment if needed, avoids that.
    The swap is safe because this runs on the face's own thread, which is not writing meanwhile.
    """
    from multiprocessing import resource_tracker

    saved = sys.stderr
    try:
        try:
            usable = saved is not None and saved.fileno() >= 0
        except (AttributeError, OSError, ValueError):
            usable = False
        if not usable and sys.__stderr__ is not None:
            sys.stderr = sys.__stderr__
        resource_tracker.ensure_running()
    except Exception:
        pass  # the spawn itself will report a real problem
    finally:
        sys.stderr = saved


def spawn_worker(spec: WorkerSpec) -> tuple[Any, Connection, Connection]:
    """Start worker ``spec.index``; (its process, the command pipe's write end, the data pipe's read end).
    A daemon: multiprocessing ends it if the face exits without stopping it; if the face is killed, the
    worker sees its command pipe close and stops on its own."""
    ctx = multiprocessing.get_context("spawn")
    cmd_r, cmd_w = ctx.Pipe(duplex=False)
    data_r, data_w = ctx.Pipe(duplex=False)
    name = f"tokentop-engine-{spec.index}"
    proc = ctx.Process(target=_worker_process, args=(spec, cmd_r, data_w), name=name, daemon=True)
    proc.start()
    cmd_r.close()
    data_w.close()
    return proc, cmd_w, data_r


def _worker_process(spec: WorkerSpec, cmd: Connection, out: Connection) -> None:
    """A worker process's entry, named to ``spawn`` from here so that the worker's code (its event loop,
    runner and client) loads in the worker only: the face never runs it, and it cost the face's start-up
    ~30 ms of CPU."""
    from tui.engine.load.worker import worker_main

    worker_main(spec, cmd, out)


class WorkerPool:
    """Empty until `spawn`; every method is safe to call before it (and after `close`)."""

    def __init__(self) -> None:
        self._procs: list[Any] = []
        self._cmd: list[Connection] = []
        self.data: list[Connection] = []
        """Worker i's data pipe (its read end) at index i: what the reader thread waits on."""

    def spawn(self, specs: Iterable[WorkerSpec]) -> None:
        """Start one worker per spec (`spawn_worker`), in index order."""
        for spec in specs:
            proc, cmd_w, data_r = spawn_worker(spec)
            self._procs.append(proc)
            self._cmd.append(cmd_w)
            self.data.append(data_r)

    def send_each(self, commands: Iterable[Command]) -> None:
        """Worker i gets the i-th command; a worker already gone is skipped."""
        for conn, command in zip(self._cmd, commands, strict=False):
            with contextlib.suppress(OSError):
                _send(conn, command)

    def send_all(self, command: Command) -> None:
        """Every worker gets ``command``."""
        self.send_each(command for _ in self._cmd)

    def exitcode(self, i: int) -> int | None:
        """Worker i's exit code, None while it runs (or if there is no worker i)."""
        return self._procs[i].exitcode if i < len(self._procs) else None

    def join(self) -> None:
        """Wait for each worker to end (2 s each), killing one that does not (it ignores SIGTERM)."""
        for proc in self._procs:
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)

    def close(self) -> None:
        """Close every pipe end this process holds."""
        for conn in self._cmd + self.data:
            with contextlib.suppress(OSError):
                conn.close()


def _send(conn: Connection, command: Command) -> None:
    """Send one command to a worker (typed, so mypy checks what the worker's `_on_command` receives)."""
    conn.send(command)
