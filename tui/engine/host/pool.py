"""What the handle needs of its workers, whoever hosts them: local processes (`WorkerPool`) or processes
on other machines behind node agents (`tui.engine.host.ray_pool.RayWorkerPool`). The reader, the store and
the faces only ever see this surface."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Protocol

from tui.engine.wire import Command, WorkerSpec


class PoolError(Exception):
    """The workers cannot be placed (no cluster, a version mismatch, a node that cannot reach the target):
    one line, naming the node."""


@dataclass(frozen=True)
class NodeInfo:
    """Where some of the load comes from: one machine and the workers on it."""

    node_id: str
    host: str
    workers: tuple[int, ...]
    cpus: int
    same_clock: bool
    """The face's own host (same boot id): stamps compare directly, offset exactly 0."""
    clock_offset_ms: float = 0.0
    clock_rtt_ms: float = 0.0
    clock_bound_ms: float = 0.0
    lost_at_s: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "node_id": self.node_id,
            "host": self.host,
            "workers": len(self.workers),
            "cpus": self.cpus,
            "same_clock": self.same_clock,
            "clock_offset_ms": self.clock_offset_ms,
            "clock_rtt_ms": self.clock_rtt_ms,
            "clock_bound_ms": self.clock_bound_ms,
            "lost_at_s": self.lost_at_s,
        }


class Pool(Protocol):
    """The handle's workers: spawn, command, join, close; worker i's data pipe at ``data[i]``. Today's
    `WorkerPool` is exactly this; `RayWorkerPool` adds the nodes it placed them on."""

    data: list[Connection]

    def spawn(self, specs: Iterable[WorkerSpec]) -> None: ...

    def send_each(self, commands: Iterable[Command]) -> None: ...

    def send_all(self, command: Command) -> None: ...

    def exitcode(self, i: int) -> int | None: ...

    def join(self) -> None: ...

    def close(self) -> None: ...
