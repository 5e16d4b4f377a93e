"""The handle's side of the load: the user's `LoadTarget` split into one `WorkerShare` per worker, and the
replay's place on the timeline that every share carries. The face imports it, so it imports no event loop
or load code: a worker's (`tui.engine.load.runner`) would cost the face's start-up for nothing."""

from __future__ import annotations

from typing import NamedTuple

from tui.engine.config import LoadTarget
from tui.engine.wire import WorkerShare


class TracePlace(NamedTuple):
    """Where the replay is on the wall clock: at ``anchor_ns`` it is ``pos_ns`` into the trace."""

    anchor_ns: int | None
    pos_ns: int
    epoch: int


def split_load(
    target: LoadTarget,
    workers: int,
    level_id: int,
    seed: int = 0,
    trace: TracePlace | None = None,
) -> list[WorkerShare]:
    """Split ``target`` over ``workers`` as evenly as possible: N users -> N//W each, the first N%W one more;
    rate R -> R/W each (or in proportion to each worker's part of ``max_concurrency`` when capped); a trace
    by its requests (each worker its W-th of them: `tui.engine.traces.TraceFeed`), all on one timeline,
    ``trace``."""
    shares = []
    caps: list[int | None] = [None] * workers
    if target.max_concurrency is not None:
        caps = [target.max_concurrency // workers + (1 if i < target.max_concurrency % workers else 0)
                for i in range(workers)]  # fmt: skip
    total_cap = sum(c for c in caps if c is not None) if target.max_concurrency is not None else None
    for i in range(workers):
        users = target.concurrency // workers + (1 if i < target.concurrency % workers else 0)
        cap = caps[i]
        rate = target.rate * (cap or 0) / total_cap if total_cap else target.rate / workers
        phase = (i / target.rate) if target.rate > 0 else 0.0
        shares.append(
            WorkerShare(
                level_id=level_id,
                mode=target.mode,
                concurrency=users,
                rate=rate,
                arrival=target.arrival,
                max_concurrency=cap,
                paused=target.paused,
                phase_s=phase,
                seed=seed * 1000 + i,
                speed=target.speed,
                trace_anchor_ns=trace.anchor_ns if trace is not None else None,
                trace_pos_ns=trace.pos_ns if trace is not None else 0,
                trace_epoch=trace.epoch if trace is not None else 0,
            )
        )
    return shares
