"""The app's own cost per refresh tick, so a slow UI can be told from a slow server.

Costs are CPU time of the UI thread (`time.thread_time_ns`), not wall time: on a busy machine the wall
time of a tick also counts the engine's reader thread holding the GIL and the OS running the load
generator, which are not the UI's work. Ticks per second are wall-clock.
"""

from __future__ import annotations

from collections import deque


def _percentile_ms(values: deque[int], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] / 1e6


class FrameStats:
    """Rolling record of the last ticks (a minute at 10 Hz: a p99 over 100 ticks would be their maximum)."""

    def __init__(self, keep: int = 600) -> None:
        self.work_ns: deque[int] = deque(maxlen=keep)
        """CPU per tick in our code: engine.snapshot() plus widget updates plus any plot build."""
        self.snapshot_ns: deque[int] = deque(maxlen=keep)
        """The part of it spent inside engine.snapshot()."""
        self.frame_ns: deque[int] = deque(maxlen=keep)
        """CPU per tick until Textual has drawn its result: the tick plus the drawing (an upper bound, as
        anything else the UI thread handled meanwhile counts too)."""
        self.ends_ns: deque[int] = deque(maxlen=keep)
        """Wall-clock end of each tick."""

    def record(self, cpu_start_ns: int, cpu_snapshot_ns: int, cpu_end_ns: int, wall_end_ns: int) -> None:
        self.work_ns.append(cpu_end_ns - cpu_start_ns)
        self.snapshot_ns.append(cpu_snapshot_ns - cpu_start_ns)
        self.ends_ns.append(wall_end_ns)

    def record_frame(self, cpu_start_ns: int, cpu_drawn_ns: int) -> None:
        self.frame_ns.append(cpu_drawn_ns - cpu_start_ns)

    def clear(self) -> None:
        for values in (self.work_ns, self.snapshot_ns, self.frame_ns, self.ends_ns):
            values.clear()

    def percentile_ms(self, q: float) -> float:
        """CPU per tick at percentile q."""
        return _percentile_ms(self.work_ns, q)

    def frame_percentile_ms(self, q: float) -> float:
        return _percentile_ms(self.frame_ns, q)

    def snapshot_percentile_ms(self, q: float) -> float:
        return _percentile_ms(self.snapshot_ns, q)

    @property
    def fps(self) -> float:
        """Ticks per second over the recorded span."""
        if len(self.ends_ns) < 2:
            return 0.0
        span_ns = self.ends_ns[-1] - self.ends_ns[0]
        return (len(self.ends_ns) - 1) / (span_ns / 1e9) if span_ns > 0 else 0.0

    def summary(self) -> str:
        return (
            f"ui {self.percentile_ms(50):.1f} ms/tick · {self.frame_percentile_ms(50):.1f} ms/frame"
            f" · {self.fps:.0f} fps"
        )
