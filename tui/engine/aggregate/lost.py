"""What a lost worker leaves behind: its in-flight requests, whose outcome the face will never learn (the
server may still serve them), as cancelled records of class ``node_lost``, so the level's window ends
before the earliest of them as for any request whose chunks are not all known."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from tui.engine.aggregate.lanes import Lane
from tui.engine.records import RequestRecord

NODE_LOST = "node_lost"
NODE_LOST_ERROR = "its engine worker's node was lost"
"""A lost Ray node's records' error; a local worker killed by a signal says so instead (its cause)."""


def lost_records(
    lanes: Iterable[Lane], lost: Collection[int], workers: int, at_ns: int, error: str = NODE_LOST_ERROR
) -> list[RequestRecord]:
    """Cancelled records for the in-flight ``lanes`` of the ``lost`` workers (request ids interleave:
    ``seq * workers + worker + 1``), each with ``error``: what happened to their worker."""
    out = []
    for lane in lanes:
        seq, worker = divmod(lane.request_id - 1, workers)
        if worker in lost:
            out.append(
                RequestRecord(
                    request_id=lane.request_id,
                    worker=worker,
                    seq=seq,
                    level_id=lane.level_id,
                    sent_ns=lane.sent_ns,
                    first_content_ns=lane.first_content_ns,
                    end_ns=max(at_ns, lane.sent_ns),
                    status="cancelled",
                    error_class=NODE_LOST,
                    error=error,
                )
            )
    return out
