"""The machine's own noise floor: how late a bare event loop wakes up, measured in its own process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

# --- the machine's noise floor --------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseFloor:
    """How late a bare asyncio loop (doing nothing else) wakes up: what no timestamp here can beat."""

    p50_ms: float
    """Wake-up lag from ``asyncio.sleep(0.010)``: median (includes epoll's rounding to whole ms)."""
    p99_ms: float
    max_ms: float
    samples: int
    probe_p99_ms: float = float("nan")
    """p99 of the engine's own lag probe (`LoopLagMonitor`, a cross-thread wake-up) on the bare loop: the
    engine's loop-lag figure can't go below this."""

    def line(self) -> str:
        return (
            f"bare-loop wake-up lag (10 ms sleeps) p50 {self.p50_ms:.2f} ms, p99 {self.p99_ms:.2f} ms; "
            f"lag probe p99 {self.probe_p99_ms:.2f} ms"
        )


def noise_floor(seconds: float = 2.0, interval_s: float = 0.010) -> NoiseFloor:
    """Measure, for ``seconds``, a bare asyncio loop's wake-up lag from ``sleep(interval_s)`` and, at the same
    time, what the engine's loop-lag probe reads on it."""
    from tui.engine.load.health import LoopLagMonitor

    async def measure() -> tuple[list[float], float]:
        monitor = LoopLagMonitor(window_s=seconds + 1.0)
        probe = asyncio.ensure_future(monitor.run())
        lags: list[float] = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            await asyncio.sleep(interval_s)
            lags.append(time.perf_counter() - t - interval_s)
        probe.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probe
        return lags, monitor.p99_ms()

    lags, probe_p99 = asyncio.run(measure())
    ms = np.asarray(lags) * 1e3
    return NoiseFloor(
        p50_ms=float(np.percentile(ms, 50)),
        p99_ms=float(np.percentile(ms, 99)),
        max_ms=float(ms.max()),
        samples=int(ms.size),
        probe_p99_ms=probe_p99,
    )


class FloorProbe:
    """`noise_floor` run in its own process while something else runs (``result()`` waits for it).

    Starting Python and importing numpy takes a few hundred ms of CPU, which on a small machine is itself
    noise: give ``start_at`` (a `time.perf_counter()` reading; the clock is shared by all processes) a few
    seconds ahead, and the probe is started then, measuring from that instant, its start-up long done."""

    def __init__(self, seconds: float, *, start_at: float | None = None) -> None:
        code = (
            "import json, time; from tui.calibrate.floor import noise_floor; "
            f"time.sleep(max(0.0, {float(start_at or 0.0)!r} - time.perf_counter())); "
            f"print(json.dumps(noise_floor({float(seconds)!r}).__dict__))"
        )
        self.seconds = seconds + max(0.0, (start_at or 0.0) - time.perf_counter())
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )

    def result(self) -> NoiseFloor | None:
        """The floor, or None if the probe failed."""
        try:
            out, _ = self.proc.communicate(timeout=self.seconds + 30.0)
            return NoiseFloor(**json.loads(out.strip().splitlines()[-1]))
        except (subprocess.TimeoutExpired, ValueError, IndexError, TypeError):
            self.proc.kill()
            self.proc.wait()
            return None
