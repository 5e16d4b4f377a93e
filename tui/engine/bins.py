"""The fixed log-spaced latency bins every histogram shares, worker and face alike: a count per bin adds
across batches, workers and machines, where a percentile cannot be averaged."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FINE_PER_DECADE = 50
FINE_EDGES_MS: FloatArray = 10.0 ** np.linspace(-2.0, 7.0, 9 * FINE_PER_DECADE + 1)
"""Internal histogram: 0.01 ms to 10^7 ms (2.8 h), 50 bins per decade (bin width ~4.7%). Values outside are
counted in the end bins."""
N_FINE = len(FINE_EDGES_MS) - 1
FINE_CENTERS_MS: FloatArray = np.sqrt(FINE_EDGES_MS[:-1] * FINE_EDGES_MS[1:])
"""Each fine bin's geometric middle: the value a binned sample stands for (within half a bin, ~2.3%)."""


def fine_bins(values: FloatArray) -> IntArray:
    """Index of each value's fine bin (out-of-range values clamp to the end bins)."""
    idx = np.searchsorted(FINE_EDGES_MS, values, side="right") - 1
    return np.clip(idx, 0, N_FINE - 1).astype(np.int64)
