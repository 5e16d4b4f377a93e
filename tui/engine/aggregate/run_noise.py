"""How far a run's figure can be trusted: the noise between runs (a bootstrap over time blocks, and over
repeated runs where there are several) and a share's binomial interval (Wilson). Pure numpy, table-tested.

Resampling requests treats them as independent, so it sees none of what makes two runs differ (a slow
second, drift over the window, a busy machine for a while). Resampling whole seconds of the window keeps
what happened together together; resampling the runs themselves where a side has several adds their
spread (a two-level bootstrap: runs with replacement, then each chosen run's blocks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ROUNDS = 1000
CONFIDENCE = 0.95
SEED = 12345
"""Fixed, so the same runs give the same verdict every time."""
CHUNK = 100
"""Rounds resampled at once (bounds memory: rounds x values)."""


class Side:
    """One side's samples: per run, per time block, the values in it (a latency per request or gap, or one
    rate per block). ``stat``: the figure over the pooled values, ``mean`` or a percentile ``p50``/``p99``."""

    def __init__(self, runs: Sequence[Sequence[FloatArray]]) -> None:
        self.values = np.concatenate([np.asarray(b, float) for run in runs for b in run] or [np.empty(0)])
        self.block_sizes = np.asarray([len(b) for run in runs for b in run], np.int64)
        self.run_blocks = [len(run) for run in runs]
        self.block_of_value = np.repeat(np.arange(len(self.block_sizes)), self.block_sizes)
        order = np.argsort(self.values, kind="stable")
        self.sorted_values = self.values[order]
        self.sorted_block = self.block_of_value[order]

    @property
    def blocks(self) -> int:
        return len(self.block_sizes)

    def block_counts(self, rng: np.random.Generator, rounds: int) -> IntArray:
        """(rounds, blocks): how often each block is drawn in each round (runs first, then their blocks)."""
        runs = len(self.run_blocks)
        picks = rng.integers(0, runs, (rounds, runs)) if runs > 1 else np.zeros((rounds, 1), np.int64)
        out = np.zeros((rounds, self.blocks), np.int64)
        start = 0
        for r, nb in enumerate(self.run_blocks):
            times = (picks == r).sum(axis=1)  # how often run r is chosen in each round
            out[:, start : start + nb] = rng.multinomial(times * nb, np.full(nb, 1.0 / nb))
            start += nb
        return out

    def figure(self, stat: str, counts: IntArray | None = None) -> FloatArray:
        """The figure once per row of ``counts`` (all blocks once when None)."""
        counts = np.ones((1, self.blocks), np.int64) if counts is None else counts
        weights = counts[:, self.sorted_block].astype(float)  # (rounds, values), values sorted
        total = weights.sum(axis=1)
        if stat == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.asarray((weights * self.sorted_values).sum(axis=1) / total, float)
        q = float(stat.removeprefix("p")) / 100
        cum = np.cumsum(weights, axis=1)
        # The weighted inverse CDF: the first value whose cumulative weight reaches q of the total.
        idx = (cum < (q * total)[:, None]).sum(axis=1)
        return np.asarray(self.sorted_values[np.minimum(idx, len(self.sorted_values) - 1)], float)


def change_interval(
    base: Side, other: Side, stat: str, *, rounds: int = ROUNDS, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """The ``confidence`` interval of other's figure relative to base's, in percent (+5 = 5 % higher), or
    None where a side has no values or its figure is 0."""
    if not len(base.values) or not len(other.values):
        return None
    rng = np.random.default_rng(SEED)
    changes = []
    for start in range(0, rounds, CHUNK):
        n = min(CHUNK, rounds - start)
        a = base.figure(stat, base.block_counts(rng, n))
        b = other.figure(stat, other.block_counts(rng, n))
        with np.errstate(invalid="ignore", divide="ignore"):
            changes.append((b / a - 1) * 100)
    pct = np.concatenate(changes)
    pct = pct[np.isfinite(pct)]
    if len(pct) < rounds // 2:
        return None
    tail = 50 * (1 - confidence)
    lo, hi = np.percentile(pct, [tail, 100 - tail])
    return float(lo), float(hi)


def bounded_from(percentile: float, confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose largest one bounds the ``percentile`` from above at ``confidence`` (two-sided,
    distribution-free): a p99 needs 368, a p50 6. Fewer, and any tail value may be luck."""
    q = percentile / 100
    return math.ceil(math.log((1 - confidence) / 2) / math.log(q)) if 0 < q < 1 else 1


def verdict(interval: tuple[float, float], threshold_pct: float, higher_is_better: bool) -> str:
    """ "better"/"worse" only when the whole interval lies beyond ±``threshold_pct`` (so beyond 0 too);
    otherwise "within noise" (criterion.rs's rule: significant and beyond its noise threshold)."""
    lo, hi = interval
    if lo > threshold_pct:
        return "better" if higher_is_better else "worse"
    if hi < -threshold_pct:
        return "worse" if higher_is_better else "better"
    return "within noise"


def wilson_interval(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson's score interval for a share ``successes / trials``: (0, 1) with no trials. Unlike the normal
    approximation it stays inside [0, 1] and keeps its coverage near 0 % and 100 %, where SLOs live."""
    if trials <= 0:
        return 0.0, 1.0
    z = _z(confidence)
    p = successes / trials
    z2n = z * z / trials
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / trials + z2n / (4 * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


def _z(confidence: float) -> float:
    """The two-sided normal quantile, by bisection on erf (no scipy)."""
    target = confidence
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if math.erf(mid / math.sqrt(2)) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
