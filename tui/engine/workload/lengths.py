"""Per-request token counts: draws from a `LengthDist` and picks from a weighted `Scenario` list.

Pure functions of a `random.Random` the caller seeds per request, so a workload stays a function of
(seed, worker, seq) and two runs with the same seed ask for the same lengths in the same order.
"""

from __future__ import annotations

import bisect
import itertools
import random

from tui.engine.config import LengthDist, Scenario

NORMAL_REDRAWS = 32
"""A normal draw outside [lo, hi] is drawn again up to this often (a truncated normal), then clamped: a
range far in a tail cannot loop for long."""


def draw_length(dist: LengthDist, rng: random.Random) -> int:
    """One whole token count from ``dist``, always within [lo, hi]."""
    if dist.kind == "fixed":
        return dist.lo
    if dist.kind == "uniform":
        return rng.randint(dist.lo, dist.hi)
    for _ in range(NORMAL_REDRAWS):
        n = round(rng.gauss(dist.mean, dist.stddev))
        if dist.lo <= n <= dist.hi:
            return n
    return min(max(round(dist.mean), dist.lo), dist.hi)


class ScenarioPicker:
    """Picks one (ISL, OSL) pair per request with probability proportional to its weight."""

    def __init__(self, scenarios: tuple[Scenario, ...]) -> None:
        if not scenarios:
            raise ValueError("no scenarios")
        self.scenarios = scenarios
        self._cum = list(itertools.accumulate(s.weight for s in scenarios))

    def pick(self, rng: random.Random) -> Scenario:
        """One scenario, drawn by weight."""
        i = bisect.bisect_right(self._cum, rng.random() * self._cum[-1])
        return self.scenarios[min(i, len(self.scenarios) - 1)]
