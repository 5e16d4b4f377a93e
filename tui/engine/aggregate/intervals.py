"""How far to trust a percentile or a rate: 95 % intervals that assume no distribution (numpy only).

A percentile's interval comes from order statistics. Of n samples, the number below the true q-quantile is
Binomial(n, q), so the sorted samples x(l) and x(u) bracket the quantile with probability F(u-1) - F(l-1)
(F the binomial CDF); l and u are taken with at most 2.5 % in each tail. With too few samples no such pair
exists and the percentile cannot be bounded yet: p50 needs 6 samples, p90 36, p95 72, p99 368 (``q^n`` must
reach 2.5 %). Such a figure is shown with ``~`` and saved ``bounded: false``: a p99 of 40 requests is the
largest of them, not a p99.

A rate's interval (output tokens/s of a level) comes from a bootstrap over time blocks of its window: the
window cut into whole seconds, the seconds resampled with replacement, so a drift or a stall inside the window
widens it. Blocks of a second keep most of the dependence between neighbouring requests inside a block.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import numpy.typing as npt

CONFIDENCE = 0.95
MIN_BLOCKS = 4
"""Fewer whole blocks (seconds) than this in a window: its rate has no interval (the knee rule then takes the
figure alone)."""
RESAMPLES = 1000
EXACT_UP_TO = 100_000
"""Ranks from the exact binomial up to this many samples; the normal approximation above (a histogram's
millions of samples would cost a pass over millions each time)."""
_Z = {0.95: 1.959963984540054}

Interval = tuple[float, float]


@lru_cache(maxsize=4096)
def order_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """0-based indices (lo, hi) into ``n`` sorted samples whose values bracket the ``q``-quantile (0 < q < 1)
    with at least ``confidence``; None when ``n`` is too small for that."""
    if n < 1 or not 0.0 < q < 1.0:
        return None
    alpha = (1.0 - confidence) / 2.0
    if n > EXACT_UP_TO:  # the binomial is normal here to far better than a rank
        z = _Z.get(confidence, 1.96)
        half = z * math.sqrt(n * q * (1.0 - q))
        lo, hi = math.floor(n * q - half), math.ceil(n * q + half)
        return (lo, hi) if lo >= 0 and hi <= n - 1 else None
    k = np.arange(n, dtype=np.float64)
    # log P(B = k) for k = 0..n by the ratio P(k+1)/P(k) = (n-k)/(k+1) * q/(1-q), normalised at the end
    steps = np.log((n - k) / (k + 1.0)) + math.log(q) - math.log1p(-q)
    log_pmf = np.concatenate(([0.0], np.cumsum(steps)))
    pmf = np.exp(log_pmf - log_pmf.max())
    cdf = np.cumsum(pmf / pmf.sum())[:n]  # cdf[k] = P(B <= k), k = 0..n-1
    low = np.flatnonzero(cdf <= alpha)  # rank l (1-based) = k + 1 with P(B <= l - 1) <= alpha
    high = np.flatnonzero(cdf >= 1.0 - alpha)  # rank u (1-based) = k + 1 with P(B <= u - 1) >= 1 - alpha
    if low.size == 0 or high.size == 0:
        return None
    return int(low[-1]), int(high[0])


def quantile_interval(sorted_values: npt.NDArray[np.float64], q: float) -> Interval | None:
    """The ``q``-quantile's interval from ``sorted_values`` (ascending), or None when it cannot be bounded."""
    ranks = order_ranks(int(sorted_values.size), q)
    if ranks is None:
        return None
    return float(sorted_values[ranks[0]]), float(sorted_values[ranks[1]])


def rate_interval(
    per_bucket: npt.NDArray[np.float64], buckets_per_block: int, seed: int = 0
) -> Interval | None:
    """The interval of a rate as ratios to it, (lo / rate, hi / rate), from a bootstrap over whole blocks of
    ``buckets_per_block`` consecutive buckets of ``per_bucket`` (counts per bucket over the window); None
    with fewer than `MIN_BLOCKS` blocks or nothing counted. Ratios, so that the caller scales the figure it
    shows, whatever population it counts."""
    blocks = len(per_bucket) // max(1, buckets_per_block)
    if blocks < MIN_BLOCKS:
        return None
    sums = per_bucket[: blocks * buckets_per_block].reshape(blocks, -1).sum(axis=1)
    mean = float(sums.mean())
    if mean <= 0:
        return None
    rng = np.random.default_rng(seed)
    means = sums[rng.integers(0, blocks, size=(RESAMPLES, blocks))].mean(axis=1)
    lo, hi = np.percentile(means, [50 * (1 - CONFIDENCE), 50 * (1 + CONFIDENCE)])
    return float(lo) / mean, float(hi) / mean


def rate_ci(per_bucket: npt.NDArray[np.float64], bucket_ns: int, rate: float) -> Interval | None:
    """``rate``'s interval from the counts per ``bucket_ns`` bucket of its window, blocks of a second (or
    of one bucket, when a bucket is longer); None without one (`rate_interval`) or without a rate."""
    if not math.isfinite(rate):
        return None
    ratios = rate_interval(per_bucket, max(1, round(1e9 / bucket_ns)))
    return None if ratios is None else (rate * ratios[0], rate * ratios[1])
