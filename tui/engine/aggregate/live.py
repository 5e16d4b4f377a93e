"""The live gauges: output tokens/s and requests/s over the last few seconds, from a small ring of buckets."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

LIVE_WINDOW_S = 5.0
"""The live gauges (output tokens/s, requests/s) average over this many seconds."""
LIVE_BUCKET_NS = 100_000_000
LIVE_BUCKETS = 600
"""A minute of 100 ms buckets, reused round the ring."""

FloatArray = npt.NDArray[np.float64]


class LiveRates:
    """Tokens received and requests ended per 100 ms bucket, and the usage/chunk ratio that turns the
    workers' live token counts (one per chunk when the server does not count) into usage tokens."""

    def __init__(self, t0_ns: int) -> None:
        self.t0_ns = t0_ns
        self.tokens = np.zeros(LIVE_BUCKETS, dtype=np.float64)
        self.ends = np.zeros(LIVE_BUCKETS, dtype=np.float64)
        self.slot_id = np.full(LIVE_BUCKETS, -1, dtype=np.int64)
        self.counted_tokens = 0.0
        self.usage_tokens = 0.0

    def add_tokens(self, t_ns: int, tokens: float) -> None:
        """Output tokens a worker received in the batch it sent at ``t_ns``."""
        self._add(self.tokens, t_ns, tokens)

    def add_end(self, t_ns: int) -> None:
        """A request ended successfully at ``t_ns``."""
        self._add(self.ends, t_ns, 1.0)

    def add_usage(self, counted: float, usage: float) -> None:
        """A finished request the workers counted as ``counted`` live tokens had ``usage`` by the server."""
        self.counted_tokens += counted
        self.usage_tokens += usage

    def _add(self, ring: FloatArray, t_ns: int, value: float) -> None:
        b = (t_ns - self.t0_ns) // LIVE_BUCKET_NS
        slot = b % LIVE_BUCKETS
        if self.slot_id[slot] != b:
            self.slot_id[slot] = b
            self.tokens[slot] = 0.0
            self.ends[slot] = 0.0
        ring[slot] += value

    def rates(self, now_ns: int) -> tuple[float, float]:
        """(output tokens/s, requests/s) over the last `LIVE_WINDOW_S` seconds."""
        b_now = (now_ns - self.t0_ns) // LIVE_BUCKET_NS
        k = int(LIVE_WINDOW_S * 1e9 // LIVE_BUCKET_NS)
        sel = (self.slot_id > b_now - k) & (self.slot_id <= b_now)
        span_s = min(LIVE_WINDOW_S, max((now_ns - self.t0_ns) / 1e9, 0.1))
        ratio = self.usage_tokens / self.counted_tokens if self.counted_tokens > 0 else 1.0
        return (
            float(self.tokens[sel].sum()) * ratio / span_s,
            float(self.ends[sel].sum()) / span_s,
        )
