"""Is the load generator itself keeping up? Measured inside each engine worker process.

A busy event loop stamps tokens late (a chunk that arrived during a 20 ms stall is stamped up to 20 ms late),
so the worker watches two things: how long a wake-up takes to be served by its event loop (event-loop lag)
and how much of a core the process uses. The face judges them (`tui.engine.aggregate.saturation`) with
thresholds it owns.

Two kinds of reading leave the worker: the rolling ones (lag p99 over the last 3 s, CPU over the last 2 s)
in every batch, for display and the run's maxima; and one per disjoint health window (``health_window_s``,
lag p99 and CPU share over that window alone), which the face's `Sustain` turns into the saturated flag.
Disjoint, because a rolling window keeps one noisy moment in view for its whole length: "two consecutive
rolling readings" would still be one moment.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Iterable

IDLE_PROBE_S = 0.2
"""How long a worker measures its loop lag with no load at start (20 probes): this machine's noise floor,
which the face's lag threshold is taken from (`tui.engine.aggregate.saturation.LAG_OVER_IDLE`)."""


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
        self.window_lags_s: list[float] = []
        """Lags served since the last `take_window_p99_ms` (the current health window)."""

    async def run(self) -> None:
        """Run until cancelled."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        lags = self.lags_s

        def served(posted: float) -> None:
            lag = time.perf_counter() - posted
            lags.append(lag)
            self.window_lags_s.append(lag)

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
        return _p99_ms(self.lags_s)

    def take_window_p99_ms(self) -> float:
        """The 99th percentile of the lags served since the last call, in ms; starts the next window."""
        return self.take_window_ms()[0]

    def take_window_ms(self) -> tuple[float, float]:
        """The (99th percentile, mean) of the lags served since the last call, in ms; starts the next
        window. The p99 bounds how late a stamp was; the mean is how long, on average, an answer that
        ended waited to be read (the time a closed loop's slot stands idle for the client)."""
        lags, self.window_lags_s = self.window_lags_s, []
        return _p99_ms(lags), (sum(lags) / len(lags) * 1e3 if lags else 0.0)


def _p99_ms(lags_s: Iterable[float]) -> float:
    lags = sorted(lags_s)
    if not lags:
        return 0.0
    return lags[min(len(lags) - 1, int(0.99 * len(lags)))] * 1e3


class CpuMeter:
    """This process's CPU time over wall time (0..1 of one core, all threads) over about ``window_s``."""

    def __init__(self, window_s: float = 2.0) -> None:
        self.window_s = window_s
        self.samples: deque[tuple[float, float]] = deque([(time.perf_counter(), time.process_time())])
        self.window_start = self.samples[0]

    def share(self) -> float:
        """Sample now; the share since the oldest sample within the window."""
        wall, cpu = time.perf_counter(), time.process_time()
        self.samples.append((wall, cpu))
        while len(self.samples) > 2 and wall - self.samples[1][0] >= self.window_s:
            self.samples.popleft()
        wall0, cpu0 = self.samples[0]
        return (cpu - cpu0) / (wall - wall0) if wall > wall0 else 0.0

    def take_window_share(self) -> float:
        """The share since the last call (or since created): one health window's; starts the next window."""
        wall, cpu = time.perf_counter(), time.process_time()
        wall0, cpu0 = self.window_start
        self.window_start = (wall, cpu)
        return (cpu - cpu0) / (wall - wall0) if wall > wall0 else 0.0


class InFlightMeter:
    """The requests in flight, averaged over time since the last take: a closed loop whose users are not
    all in flight spends time between requests, load the server never sees."""

    def __init__(self) -> None:
        self.count = 0
        self._at_ns = self._from_ns = time.perf_counter_ns()
        self._area = 0
        """In-flight count times ns, since `_from_ns`."""

    def set(self, count: int) -> None:
        """The count changed to ``count`` now."""
        now = time.perf_counter_ns()
        self._area += self.count * (now - self._at_ns)
        self._at_ns, self.count = now, count

    def take_window_mean(self) -> float | None:
        """The mean count since the last call (None over no time); starts the next window."""
        self.set(self.count)
        span = self._at_ns - self._from_ns
        mean = self._area / span if span > 0 else None
        self._area, self._from_ns = 0, self._at_ns
        return mean
