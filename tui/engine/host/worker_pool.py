"""The worker processes one engine started, and the two pipes to each: commands out, messages in. Sending,
joining and closing in one place, so the handle speaks of "the workers" and never of a process or a pipe."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from multiprocessing.connection import Connection
from typing import Any

from tui.engine.host.spawning import spawn_worker
from tui.engine.wire import Command, WorkerSpec


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
        """Wait for each worker to end (2 s each), terminating one that does not."""
        for proc in self._procs:
            proc.join(2.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(2.0)

    def close(self) -> None:
        """Close every pipe end this process holds."""
        for conn in self._cmd + self.data:
            with contextlib.suppress(OSError):
                conn.close()


def _send(conn: Connection, command: Command) -> None:
    """Send one command to a worker (typed, so mypy checks what the worker's `_on_command` receives)."""
    conn.send(command)
