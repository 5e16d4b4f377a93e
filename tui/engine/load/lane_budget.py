"""Which in-flight requests a worker sends full lane deltas for.

The face shows at most ``max_lanes`` lanes, the lowest request ids, and ids interleave over workers
(``seq * workers + index``), so each worker's oldest in-flight requests are the global lowest: a worker
sending its oldest ``max(4, ceil(2 * max_lanes / workers))`` covers every lane the face can show. Ingesting
a lane delta is most of what a batch costs the face, so with many workers the rest are left out. The oldest
in-flight request of every level is always sent too: a level's window ends before it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MIN_LANES = 4


def lane_budget(max_lanes: int, workers: int) -> int:
    """Lanes one worker of ``workers`` sends in full."""
    return max(MIN_LANES, math.ceil(2 * max_lanes / max(1, workers)))


def in_budget(levels: Iterable[int], budget: int) -> list[bool]:
    """For in-flight requests in request-id order (given by their level ids): is each one sent in full."""
    seen: set[int] = set()
    out = []
    for n, level in enumerate(levels):
        out.append(n < budget or level not in seen)
        seen.add(level)
    return out
