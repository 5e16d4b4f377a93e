"""The workers' arrival counts on the face: binned TTFTs and chunk gaps kept by arrival time per level
(`BinnedLog`), and the fold of each `Arrivals` into the levels' timelines and the rolling series.

What arrived counts whether its stream has finished or not, so a level and the rolling views fill from the
first token, however long the answers."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate import metrics as m
from tui.engine.aggregate.series import MetricSeries, Timeline
from tui.engine.wire import ARRIVAL_BUCKET_NS, Arrivals

if TYPE_CHECKING:
    from tui.engine.aggregate.levels import LevelAgg

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
            while self.t.size > self.cap // 2:
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


def fold_arrivals(
    batch_t_ns: int,
    arrivals: Sequence[Arrivals],
    levels: Mapping[int, LevelAgg],
    series: MutableMapping[str, MetricSeries],
) -> None:
    """Add one batch's arrivals to their levels (tokens by arrival time, TTFTs, gaps) and to the rolling
    TTFT and chunk-ITL series (stamped with the batch: they arrived since the worker's last)."""
    for a in arrivals:
        ttft_bins = np.frombuffer(a.ttft_bins, dtype=np.int64)
        ttft_counts = np.frombuffer(a.ttft_counts, dtype=np.int64)
        gap_bins = np.frombuffer(a.gap_bins, dtype=np.int64)
        gap_counts = np.frombuffer(a.gap_counts, dtype=np.int64)
        series["ttft"].add_counts(batch_t_ns, ttft_bins, ttft_counts)
        series["itl_chunk"].add_counts(batch_t_ns, gap_bins, gap_counts)
        lv = levels.get(a.level_id)
        if lv is None:
            continue
        lv.version += 1
        buckets = np.frombuffer(a.token_buckets, dtype=np.int64)
        tokens = np.frombuffer(a.token_counts, dtype=np.int64).astype(np.float64)
        lv.timeline.add(Timeline.TOK, buckets * ARRIVAL_BUCKET_NS + ARRIVAL_BUCKET_NS // 2, tokens)
        lv.ttft_log.add(batch_t_ns, ttft_bins, ttft_counts)
        lv.gap_log.add(batch_t_ns, gap_bins, gap_counts)
        lv.first_tokens(batch_t_ns, int(ttft_counts.sum()))
