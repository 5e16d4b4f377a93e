"""The app's own cost per refresh tick, so a slow UI can be told from a slow server."""

from __future__ import annotations

from collections import deque


class FrameStats:
    """Rolling record of the last ticks: work done in our code, and ticks per second."""

    def __init__(self, keep: int = 100) -> None:
        self.work_ns: deque[int] = deque(maxlen=keep)
        """Time spent per tick in our code: snapshot() plus widget updates plus any plot build."""
        self.snapshot_ns: deque[int] = deque(maxlen=keep)
        """The part of it spent inside engine.snapshot()."""
        self.ends_ns: deque[int] = deque(maxlen=keep)

    def record(self, start_ns: int, snapshot_done_ns: int, end_ns: int) -> None:
        self.work_ns.append(end_ns - start_ns)
        self.snapshot_ns.append(snapshot_done_ns - start_ns)
        self.ends_ns.append(end_ns)

    @property
    def last_ms(self) -> float:
        return self.work_ns[-1] / 1e6 if self.work_ns else 0.0

    def percentile_ms(self, q: float) -> float:
        if not self.work_ns:
            return 0.0
        ordered = sorted(self.work_ns)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] / 1e6

    @property
    def fps(self) -> float:
        """Ticks per second over the recorded span."""
        if len(self.ends_ns) < 2:
            return 0.0
        span_ns = self.ends_ns[-1] - self.ends_ns[0]
        return (len(self.ends_ns) - 1) / (span_ns / 1e9) if span_ns > 0 else 0.0

    def summary(self) -> str:
        return f"ui {self.percentile_ms(50):.1f}/{self.percentile_ms(99):.1f} ms p50/p99 · {self.fps:.0f} fps"
