"""Bounded aggregates the store is built from: rolling metric series, reservoirs, per-level timelines.

Each keeps a fixed amount of memory however long the run (see `tui.engine.aggregate.store` for how they
combine).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate import metrics as m
from tui.engine.snapshot import Histogram, Stats

SERIES_CAP = 1 << 17
"""Raw samples kept per rolling metric (about 2 MB each)."""
IDLE_SERIES_CAP = 1024
"""For a store no request will reach (`tokentop watch`, a handle before `start`): the rings are written at
construction, so not the 11 MB a load run's store writes up front."""
RING_SLOTS = 64
"""Seconds of per-second histograms: covers the longest rolling window (60 s)."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_DISPLAY_EDGES = tuple(float(e) for e in m.DISPLAY_EDGES_MS)
"""Every histogram's edges, as the snapshot carries them (made once: the views ask for sixteen a refresh)."""


class MetricSeries:
    """One latency metric over time: exact recent samples plus bounded histograms (see module doc)."""

    def __init__(self, t0_ns: int, cap: int | None = None) -> None:
        self.t0_ns = t0_ns
        self.cap = cap = cap or SERIES_CAP
        # Written now (np.full), not left to np.zeros' lazy pages: an untouched ring became resident only as
        # samples filled it, so the face's memory crept for the hour or two that took (+9 MB in a soak).
        self.t = np.full(cap, 0, dtype=np.int64)
        self.v = np.full(cap, 0.0, dtype=np.float64)
        self.bins = np.full(cap, 0, dtype=np.int16)
        """Each raw sample's fine bin (computed once on add: a window's histogram is then one bincount)."""
        self.count = 0
        """Samples ever added."""
        self.evicted_max_t = -(1 << 62)
        """Latest timestamp among samples pushed out of the raw ring."""
        self.slot_sec = np.full(RING_SLOTS, -1, dtype=np.int64)
        self.slot_hist = np.zeros((RING_SLOTS, m.N_FINE), dtype=np.int64)
        self.slot_moments = [m.Moments() for _ in range(RING_SLOTS)]
        self.max_sec = -1
        self.all_hist = np.zeros(m.N_FINE, dtype=np.int64)
        self.all_moments = m.Moments()
        self.version = 0

    def add(self, t_ns: IntArray, values: FloatArray, bins: IntArray | None = None) -> None:
        """Add samples stamped ``t_ns`` (NaNs dropped); ``bins``: their fine bins where known already (binned
        samples at their bins' middles: none is NaN)."""
        if bins is None:
            keep = ~np.isnan(values)
            if not keep.all():
                t_ns, values = t_ns[keep], values[keep]
        k = int(values.size)
        if k == 0:
            return
        self.version += 1
        if bins is None:
            bins = m.fine_bins(values)
        # raw ring: the last `cap` samples (more at once, as a fold of many batches may bring, pass through
        # it: the head is evicted at once, though the histograms below count every sample)
        kept = min(k, self.cap)
        if kept < k:
            self.evicted_max_t = max(self.evicted_max_t, int(t_ns[: k - kept].max()))
            self.count += k - kept
        start = self.count % self.cap
        idx = (start + np.arange(kept)) % self.cap
        if self.count + kept > self.cap:
            n_old = min(self.cap, self.count)
            overwritten = idx[idx < n_old] if self.count < self.cap else idx
            if overwritten.size:
                self.evicted_max_t = max(self.evicted_max_t, int(self.t[overwritten].max()))
        self.t[idx] = t_ns[k - kept :]
        self.v[idx] = values[k - kept :]
        self.bins[idx] = bins[k - kept :]
        self.count += kept
        # whole run
        self.all_hist += np.bincount(bins, minlength=m.N_FINE)
        self.all_moments.add(values)
        # per-second ring
        secs = (t_ns - self.t0_ns) // 1_000_000_000
        self.max_sec = max(self.max_sec, int(secs.max()))
        lo = self.max_sec - RING_SLOTS + 1
        for s in np.unique(secs[secs >= lo]).tolist():
            slot = s % RING_SLOTS
            if self.slot_sec[slot] != s:
                self.slot_sec[slot] = s
                self.slot_hist[slot] = 0
                self.slot_moments[slot] = m.Moments()
            sel = secs == s
            self.slot_hist[slot] += np.bincount(bins[sel], minlength=m.N_FINE)
            self.slot_moments[slot].add(values[sel])

    def histogram(self, now_ns: int, window_s: float | None) -> Histogram:
        """Display histogram and stats of the samples stamped within the last ``window_s`` (None: all)."""
        edges = _DISPLAY_EDGES
        if self.count == 0:
            return Histogram(edges, (0,) * m.N_DISPLAY, Stats())
        since = -(1 << 62) if window_s is None else now_ns - int(window_s * 1e9)
        n = min(self.count, self.cap)
        if self.evicted_max_t < since or self.count <= self.cap:
            t, v, bins = self.t[:n], self.v[:n], self.bins[:n]
            if window_s is not None:
                inside = t >= since
                v, bins = v[inside], bins[inside]
            counts = m.display_counts_from_fine(np.bincount(bins, minlength=m.N_FINE))
            return Histogram(edges, tuple(counts.tolist()), m.stats(v))
        # The raw ring no longer holds the whole window: fall back to histograms.
        if window_s is None:
            fine, mom = self.all_hist, self.all_moments
        else:
            # whole seconds overlapping the window (so up to one second more than asked)
            now_sec = (now_ns - self.t0_ns) // 1_000_000_000
            first = (since - self.t0_ns) // 1_000_000_000
            sel = (self.slot_sec >= first) & (self.slot_sec <= now_sec)
            fine = self.slot_hist[sel].sum(axis=0)
            mom = m.Moments()
            for i in np.flatnonzero(sel).tolist():
                mom.merge(self.slot_moments[i])
        return Histogram(
            edges, tuple(m.display_counts_from_fine(fine).tolist()), m.stats_from_fine(fine, mom)
        )


class Reservoir:
    """Columns of rows, exact up to ``cap`` rows, then a uniform random sample of ``cap`` (Algorithm R)."""

    def __init__(self, cap: int, columns: dict[str, Any], seed: int = 0) -> None:
        self.cap = cap
        self.cols = {name: np.zeros(cap, dtype=dt) for name, dt in columns.items()}
        self.seen = 0
        self.rng = np.random.default_rng(seed)

    @property
    def size(self) -> int:
        """Rows held."""
        return min(self.seen, self.cap)

    @property
    def exact(self) -> bool:
        """True while every row ever added is held."""
        return self.seen <= self.cap

    def add(self, rows: dict[str, npt.NDArray[Any]]) -> None:
        """Add rows (a dict of equal-length column arrays)."""
        k = len(next(iter(rows.values())))
        if k == 0:
            return
        free = max(0, self.cap - self.seen)
        direct = min(free, k)
        if direct:
            for name, arr in rows.items():
                self.cols[name][self.seen : self.seen + direct] = arr[:direct]
        if k > direct:
            # Row i (0-based overall) replaces a random slot with probability cap/(i+1).
            overall = self.seen + direct + np.arange(k - direct)
            slots = (self.rng.random(k - direct) * (overall + 1)).astype(np.int64)
            hit = slots < self.cap
            for name, arr in rows.items():
                self.cols[name][slots[hit]] = arr[direct:][hit]
        self.seen += k

    def view(self) -> dict[str, npt.NDArray[Any]]:
        """The held rows, column by column (views, not copies)."""
        n = self.size
        return {name: col[:n] for name, col in self.cols.items()}


class Timeline:
    """Per-level counters by time: fixed bucket count; the bucket width doubles when the level outgrows it."""

    TOK, END_OK, SENT_OK, SENT_FAIL, SENT_IN, SENT_OUT, TOK_OK = range(7)
    """``TOK``: output tokens by arrival, from every stream; ``TOK_OK``: those of streams that finished."""
    CHANNELS = 7

    def __init__(self, start_ns: int, res_ns: int = 100_000_000, buckets: int = 4096) -> None:
        self.start_ns = start_ns
        self.res_ns = res_ns
        self.n = buckets
        self.b = np.zeros((self.CHANNELS, buckets), dtype=np.float64)

    def add(self, channel: int, t_ns: IntArray, weights: FloatArray | None = None) -> None:
        """Add ``weights`` (default 1 each) at times ``t_ns``, widening the buckets if needed."""
        if t_ns.size == 0:
            return
        idx = np.maximum((t_ns - self.start_ns) // self.res_ns, 0)
        top = int(idx.max())
        while top >= self.n:
            self.b = self.b.reshape(self.CHANNELS, self.n // 2, 2).sum(axis=2)
            self.b = np.concatenate([self.b, np.zeros_like(self.b)], axis=1)
            self.res_ns *= 2
            idx //= 2
            top //= 2
        self.b[channel] += np.bincount(idx, weights=weights, minlength=self.n)[: self.n]

    def align(self, from_ns: int, to_ns: int) -> tuple[int, int]:
        """Bucket range [b0, b1) inside [from_ns, to_ns] (rounded inward)."""
        b0 = max(0, -((self.start_ns - from_ns) // self.res_ns))  # ceil
        b1 = min(self.n, (to_ns - self.start_ns) // self.res_ns)
        return int(b0), int(max(b0, b1))

    def edge_ns(self, b: int) -> int:
        """Start time of bucket ``b``."""
        return self.start_ns + b * self.res_ns

    def total(self, channel: int, b0: int, b1: int | None = None) -> float:
        """Sum of ``channel`` over buckets [b0, b1)."""
        return float(self.b[channel, b0:b1].sum())
