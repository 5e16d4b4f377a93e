"""Is the load generator itself keeping up? Measured inside each engine worker process.

A busy event loop stamps tokens late (a chunk that arrived during a 20 ms stall is stamped up to 20 ms late),
so the worker watches two things: how long a wake-up takes to be served by its event loop (event-loop lag)
and how much of a core the process uses. The handle turns these into `ClientHealth` with thresholds it owns.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque


class LoopLagMonitor:
    """Every ``interval_s`` a small thread posts a callback to the loop and measures how long the loop takes
    to run it: exactly the wait a socket that just became readable suffers before its data is stamped. p99
    over the last ``window_s``.

    Why not an ``asyncio.sleep`` timer measuring its own lateness: epoll rounds its timeout up to whole
    milliseconds, so an idle loop's timers already run 0-1 ms late and a 2 ms threshold would trip on
    nothing. A cross-thread wake-up goes through the loop's self-pipe, like socket readiness does.
    """

    def __init__(self, interval_s: float = 0.010, window_s: float = 3.0) -> None:
        self.interval_s = interval_s
        self.lags_s: deque[float] = deque(maxlen=max(10, int(window_s / interval_s)))

    async def run(self) -> None:
        """Run until cancelled."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        lags = self.lags_s

        def served(posted: float) -> None:
            lags.append(time.perf_counter() - posted)

        def probe() -> None:
            while not stop.wait(self.interval_s):
                try:
                    loop.call_soon_threadsafe(served, time.perf_counter())
                except RuntimeError:  # loop closed
                    return

        thread = threading.Thread(target=probe, name="tokentop-lag-probe", daemon=True)
        thread.start()
        try:
            await asyncio.Event().wait()
        finally:
            stop.set()
            thread.join(1.0)

    def p99_ms(self) -> float:
        """The 99th percentile of the recent lags, in ms (0 before the first probe)."""
        if not self.lags_s:
            return 0.0
        lags = sorted(self.lags_s)
        return lags[min(len(lags) - 1, int(0.99 * len(lags)))] * 1e3


class CpuMeter:
    """This process's CPU time over wall time (0..1 of one core, all threads) over about ``window_s``."""

    def __init__(self, window_s: float = 2.0) -> None:
        self.window_s = window_s
        self.samples: deque[tuple[float, float]] = deque([(time.perf_counter(), time.process_time())])

    def share(self) -> float:
        """Sample now; the share since the oldest sample within the window."""
        wall, cpu = time.perf_counter(), time.process_time()
        self.samples.append((wall, cpu))
        while len(self.samples) > 2 and wall - self.samples[1][0] >= self.window_s:
            self.samples.popleft()
        wall0, cpu0 = self.samples[0]
        return (cpu - cpu0) / (wall - wall0) if wall > wall0 else 0.0
