"""The face's account of lost nodes: a node's workers come in one by one (each `WorkerLost` after that
worker's last batch), and only once all are in does the one line about the node go out."""

from __future__ import annotations

from collections.abc import Sequence

from tui.engine.host.pool import NodeInfo
from tui.engine.wire import WorkerLost


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
    """The one line a lost node gets."""
    at_s = (lost.at_ns - t0_ns) / 1e9
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
