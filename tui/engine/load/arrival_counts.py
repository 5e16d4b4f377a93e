"""What arrived since the last batch, per level, as the counts an `Arrivals` carries.

Built at batch time from the chunk stamps the worker already slices for its lane deltas (one call per lane
per batch, then one numpy pass per level), so the per-chunk path of the stream is untouched.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tui.engine.bins import N_FINE, fine_bins
from tui.engine.wire import ARRIVAL_BUCKET_NS, Arrivals

_NO_STAMP = -1
_ONES = np.ones(1024, dtype=np.int64).tobytes()


class LevelArrivals:
    """One level's chunks noted since the last batch (each lane holds its level's, so noting is one call)."""

    __slots__ = ("level_id", "parts", "ttft_ms")

    def __init__(self, level_id: int) -> None:
        self.level_id = level_id
        self.parts: list[tuple[bytes, bytes | None, int]] = []
        """(stamps, per-chunk tokens or None for one each, the stream's previous stamp or `_NO_STAMP`)."""
        self.ttft_ms: list[float] = []

    def note(self, sent_ns: int, prev_ns: int | None, stamps: bytes, counts: bytes | None) -> None:
        """Chunks that arrived in one stream since its last note: their stamps (an ``array("q")``'s bytes),
        the server's token count per chunk (the same; None: one each), and the stream's last stamp before
        them (None: these are its first, and the first gives its TTFT)."""
        if not stamps:
            return
        if prev_ns is None:
            self.ttft_ms.append((int.from_bytes(stamps[:8], "little", signed=True) - sent_ns) / 1e6)
            prev_ns = _NO_STAMP
        self.parts.append((stamps, counts, prev_ns))

    def take(self) -> Arrivals | None:
        """The counts of everything noted since the last take (None: nothing was)."""
        if not self.parts:
            return None
        parts, self.parts = self.parts, []
        ttft, self.ttft_ms = self.ttft_ms, []
        stamps, counts, prevs = zip(*parts, strict=True)
        t = np.frombuffer(b"".join(stamps), dtype=np.int64)
        w = np.frombuffer(b"".join(map(_weights, stamps, counts)), dtype=np.int64)
        b = t // ARRIVAL_BUCKET_NS
        first = int(b.min())
        per_bucket = np.bincount(b - first, weights=w)
        filled = np.flatnonzero(per_bucket)
        # gaps: within each part, plus from the part's previous stamp to its first
        lens = np.fromiter(map(len, stamps), dtype=np.int64, count=len(stamps)) // 8
        starts = np.cumsum(lens) - lens
        inner = np.diff(t)
        keep = np.ones(inner.size, dtype=bool)
        keep[starts[1:] - 1] = False
        prev = np.asarray(prevs, dtype=np.int64)
        linked = prev != _NO_STAMP
        gaps_ns = np.concatenate([inner[keep], t[starts[linked]] - prev[linked]])
        # one binning pass for both: the TTFTs first, then the gaps
        bins = fine_bins(np.concatenate([np.asarray(ttft, dtype=np.float64), gaps_ns / 1e6]))
        ttft_bins, ttft_counts = _sparse(bins[: len(ttft)])
        gap_bins, gap_counts = _sparse(bins[len(ttft) :])
        return Arrivals(
            self.level_id,
            (filled + first).astype(np.int64).tobytes(),
            per_bucket[filled].astype(np.int64).tobytes(),
            ttft_bins.tobytes(),
            ttft_counts.tobytes(),
            gap_bins.tobytes(),
            gap_counts.tobytes(),
        )


def _weights(stamps: bytes, counts: bytes | None) -> bytes:
    """Tokens per chunk: the server's counts, else one each."""
    if counts is not None and len(counts) == len(stamps):
        return counts
    n = len(stamps)
    return _ONES[:n] if n <= len(_ONES) else np.ones(n // 8, dtype=np.int64).tobytes()


def _sparse(bins: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(bins, counts) of the bins that hold some."""
    counts = np.bincount(bins, minlength=N_FINE)
    filled = np.flatnonzero(counts)
    return filled.astype(np.int64), counts[filled].astype(np.int64)


class ArrivalCollector:
    """Every level's `LevelArrivals`, and the `Arrivals` of a batch."""

    def __init__(self) -> None:
        self._levels: dict[int, LevelArrivals] = {}

    def level(self, level_id: int) -> LevelArrivals:
        """The collector of ``level_id``'s chunks (a lane asks once, when its request starts)."""
        found = self._levels.get(level_id)
        if found is None:
            found = self._levels[level_id] = LevelArrivals(level_id)
        return found

    def note(
        self, level_id: int, sent_ns: int, prev_ns: int | None, stamps: bytes, counts: bytes | None
    ) -> None:
        """`LevelArrivals.note` for ``level_id``."""
        self.level(level_id).note(sent_ns, prev_ns, stamps, counts)

    def take(self) -> tuple[Arrivals, ...]:
        """Everything noted since the last take, one `Arrivals` per level that had some. Levels are kept
        (a few dozen in a long ramp): a lane holds its level's collector for its whole request."""
        return tuple(a for a in (p.take() for p in self._levels.values()) if a is not None)
