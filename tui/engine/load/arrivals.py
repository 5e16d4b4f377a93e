"""What arrived since the last batch, per level, as the counts an `Arrivals` carries.

Built at batch time from the chunk stamps the worker already slices for its lane deltas (one call per lane
per batch, then one numpy pass per level), so the per-chunk path of the stream is untouched.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from tui.engine.bins import sparse_counts
from tui.engine.wire import ARRIVAL_BUCKET_NS, Arrivals

_NO_STAMP = -1


@dataclass
class _Pending:
    stamps: list[bytes] = field(default_factory=list)
    weights: list[bytes] = field(default_factory=list)
    prev: list[int] = field(default_factory=list)
    """Each part's previous stamp (the lane's last chunk before it), or `_NO_STAMP` for a stream's first."""
    ttft_ms: list[float] = field(default_factory=list)


class ArrivalCollector:
    """Collects chunk stamps per level between batches and turns them into `Arrivals`."""

    def __init__(self) -> None:
        self._levels: dict[int, _Pending] = {}
        self._ones = array("q", [1] * 256).tobytes()

    def note(
        self, level_id: int, sent_ns: int, prev_ns: int | None, stamps: bytes, counts: bytes | None
    ) -> None:
        """Chunks that arrived in one stream since its last note: their stamps (an ``array("q")``'s bytes),
        the server's token count per chunk (the same; None: one each), and the stream's last stamp before
        them (None: these are its first, and the first gives its TTFT)."""
        n = len(stamps) // 8
        if n == 0:
            return
        pending = self._levels.get(level_id)
        if pending is None:
            pending = self._levels[level_id] = _Pending()
        pending.stamps.append(stamps)
        if counts is not None and len(counts) == len(stamps):
            pending.weights.append(counts)
        else:
            ones = self._ones
            while len(ones) < 8 * n:
                ones = self._ones = ones + ones
            pending.weights.append(ones[: 8 * n])
        if prev_ns is None:
            pending.prev.append(_NO_STAMP)
            pending.ttft_ms.append((int.from_bytes(stamps[:8], "little", signed=True) - sent_ns) / 1e6)
        else:
            pending.prev.append(prev_ns)

    def take(self) -> tuple[Arrivals, ...]:
        """Everything noted since the last take, one `Arrivals` per level."""
        levels, self._levels = self._levels, {}
        return tuple(_arrivals(level_id, p) for level_id, p in levels.items())


def _arrivals(level_id: int, p: _Pending) -> Arrivals:
    t = np.frombuffer(b"".join(p.stamps), dtype=np.int64)
    w = np.frombuffer(b"".join(p.weights), dtype=np.int64)
    b = t // ARRIVAL_BUCKET_NS
    first = int(b.min())
    per_bucket = np.bincount(b - first, weights=w)
    filled = np.flatnonzero(per_bucket)
    buckets, tokens = filled + first, per_bucket[filled].astype(np.int64)
    # gaps: within each part, plus from the part's previous stamp to its first
    lens = np.fromiter(map(len, p.stamps), dtype=np.int64, count=len(p.stamps)) // 8
    starts = np.cumsum(lens) - lens
    inner = np.diff(t)
    keep = np.ones(inner.size, dtype=bool)
    keep[starts[1:] - 1] = False
    prev = np.asarray(p.prev, dtype=np.int64)
    linked = prev != _NO_STAMP
    gaps_ns = np.concatenate([inner[keep], t[starts[linked]] - prev[linked]])
    gap_bins, gap_counts = sparse_counts(gaps_ns / 1e6)
    ttft_bins, ttft_counts = sparse_counts(np.asarray(p.ttft_ms, dtype=np.float64))
    return Arrivals(
        level_id,
        buckets.astype(np.int64).tobytes(),
        tokens.tobytes(),
        ttft_bins.tobytes(),
        ttft_counts.tobytes(),
        gap_bins.tobytes(),
        gap_counts.tobytes(),
    )
