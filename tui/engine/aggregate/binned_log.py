"""Fine-bin counts kept by arrival time (`BinnedLog`): a level's TTFTs and chunk gaps as the workers send
them, from which any window's histogram is a sum."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate import metrics as m

IntArray = npt.NDArray[np.int64]

BINNED_LOG_CAP = 1 << 15
"""Rows a `BinnedLog` holds before it coarsens its time stamps (a row is one bin of one batch; 24 bytes)."""
FLUSH_PARTS = 64
"""Batches a `BinnedLog` gathers before it joins them into its arrays."""


class BinnedLog:
    """Fine-bin counts stamped with the batch they arrived in: a window's histogram is the sum of the rows
    stamped inside it. Bounded: past `BINNED_LOG_CAP` rows, stamps are rounded to a grid that doubles (from
    one second) and rows of the same bin and stamp merge, so only the window edges lose precision."""

    def __init__(self, cap: int = BINNED_LOG_CAP) -> None:
        self.cap = cap
        self.t = np.zeros(0, dtype=np.int64)
        self.bin = np.zeros(0, dtype=np.int64)
        self.count = np.zeros(0, dtype=np.int64)
        self.grid_ns = 500_000_000
        self.total = 0
        self._parts: list[tuple[IntArray, IntArray, IntArray]] = []
        self._pending = 0

    def add(self, t_ns: int, bins: IntArray, counts: IntArray) -> None:
        """``counts[i]`` samples in fine bin ``bins[i]``, arrived by ``t_ns``."""
        if bins.size == 0:
            return
        self._parts.append((np.full(bins.size, t_ns, dtype=np.int64), bins, counts))
        self._pending += int(bins.size)
        self.total += int(counts.sum())
        if len(self._parts) >= FLUSH_PARTS:
            self._flush()
        if self.t.size + self._pending > self.cap:
            self._flush()
            # the new rows onto the grid, then a coarser grid until half the cap is free or one grid step
            # spans every stamp (then the rows are at most two per bin)
            self._coarsen()
            while self.t.size > self.cap // 2 and self.grid_ns <= int(self.t.max() - self.t.min()):
                self.grid_ns *= 2
                self._coarsen()

    def _flush(self) -> None:
        if self._parts:
            ts, bs, cs = zip(*self._parts, strict=True)
            self.t = np.concatenate([self.t, *ts])
            self.bin = np.concatenate([self.bin, *bs])
            self.count = np.concatenate([self.count, *cs])
            self._parts.clear()
            self._pending = 0

    def _coarsen(self) -> None:
        t = self.t // self.grid_ns * self.grid_ns
        key = t * m.N_FINE + self.bin
        uniq, inverse = np.unique(key, return_inverse=True)
        self.count = np.bincount(inverse, weights=self.count).astype(np.int64)
        self.t, self.bin = uniq // m.N_FINE, uniq % m.N_FINE

    def fine(self, from_ns: int | None = None, to_ns: int | None = None) -> IntArray:
        """Counts per fine bin of the rows stamped in [from_ns, to_ns) (None: unbounded)."""
        self._flush()
        sel = np.ones(self.t.size, dtype=bool)
        if from_ns is not None:
            sel &= self.t >= from_ns
        if to_ns is not None:
            sel &= self.t < to_ns
        return np.bincount(self.bin[sel], weights=self.count[sel], minlength=m.N_FINE).astype(np.int64)

    def median_ms(self) -> float | None:
        """The median of every sample held (within one bin), or None without any."""
        if self.total == 0:
            return None
        return m.stats_from_counts(self.fine()).p50
