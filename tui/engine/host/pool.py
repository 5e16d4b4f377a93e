"""What the handle needs of its workers, whoever hosts them: local processes (`WorkerPool`) or processes
on other machines behind node agents (`tui.engine.host.ray_pool.RayWorkerPool`). The reader, the store and
the faces only ever see this surface; and the face's account of the nodes it lost."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Protocol

from tui.engine.wire import Command, WorkerLost, WorkerSpec


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


# --- lost nodes: a node's workers come in one by one (each `WorkerLost` after that worker's last batch), and
# only once all are in does the one line about the node go out.


class LostNodes:
    """Per lost node: the requests its workers had in flight, and which of them are accounted for."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[int, set[int]]] = {}

    def add(self, worker: int, lost: WorkerLost, in_flight: int) -> int | None:
        """Worker ``worker`` of ``lost.node`` is accounted for, with ``in_flight`` requests; the node's total
        in flight once this was its last worker, else None."""
        count, seen = self._nodes.get(lost.node, (0, set()))
        seen.add(worker)
        count += in_flight
        self._nodes[lost.node] = (count, seen)
        return count if seen >= set(lost.workers) else None


def lost_line(lost: WorkerLost, in_flight: int, workers: int, level_id: int, t0_ns: int) -> str:
    """The one line a lost node (or a killed local worker) gets."""
    at_s = (lost.at_ns - t0_ns) / 1e9
    if lost.signal is not None:
        (worker,) = lost.workers
        # SIGKILL comes from the kernel's OOM killer or kill -9; any other signal names itself (a worker
        # ignores SIGTERM, SIGINT and SIGHUP: a crash, SIGSEGV or SIGABRT, is what is left)
        why = " (the kernel's OOM killer, or kill -9)" if lost.signal == "SIGKILL" else ""
        return (
            f"engine worker {worker} (of {workers}) killed by {lost.signal} at {at_s:.1f} s{why}: "
            f"{in_flight} in flight lost; level {level_id} ends there"
        )
    return (
        f"node {lost.node} lost at {at_s:.1f} s: {len(lost.workers)} of {workers} workers, "
        f"{in_flight} in flight not counted; level {level_id} ends there"
    )


def placement_line(nodes: Sequence[NodeInfo]) -> str:
    """Where the load comes from, in one line: nodes, workers on each, each node's clock bound."""
    parts = []
    for n in nodes:
        clock = "same clock" if n.same_clock else f"clock ±{n.clock_bound_ms:.2f} ms"
        parts.append(f"{n.host} {len(n.workers)} workers ({clock})")
    return f"load from {len(nodes)} Ray node(s): " + ", ".join(parts)
