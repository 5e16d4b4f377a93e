"""One stream count measured through the real engine, and the search over stream counts."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tui.calibrate.accuracy import ErrorStats, join_files
from tui.calibrate.floor import FloorProbe

if TYPE_CHECKING:
    from tui.engine.api import Engine, EngineFactory
    from tui.engine.config import EngineOptions

P50_LIMIT_MS = 0.1
"""A level's median client-added error must be within this (the bias the client adds to ITL)."""
FIRST_LEVEL = 25
MAX_LEVELS = 12
REQUEST_S = 2.5
"""Each request lasts about this long (its output length is set from the token rate)."""


# --- one level ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LevelResult:
    """One stream count, measured."""

    streams: int
    workers: int
    errors: ErrorStats
    chunks_per_s: float
    """Chunks the client matched per second of the window (offered: streams x token rate)."""
    failed: int
    loop_lag_p99_ms: float
    """Highest event-loop lag p99 any worker reported during the window."""
    cpu_share: float
    """Highest CPU share (of one core) any worker reported during the window."""
    saturated: bool
    """Whether the engine flagged itself saturated during the window."""
    fatal: str | None = None
    floor_p99_ms: float = float("nan")
    """The engine's lag probe on a bare loop in another process during the window: the machine's own noise
    (the engine's lag p99 cannot be lower; when this is near the budget, other load is spoiling the run)."""

    def accurate(self, p99_budget_ms: float) -> bool:
        e = self.errors
        return (
            self.fatal is None
            and self.failed == 0
            and e.chunks > 0
            and e.unmatched == 0
            and e.p99_abs_ms <= p99_budget_ms
            and abs(e.p50_ms) <= P50_LIMIT_MS
        )


def output_tokens_for(token_rate: float) -> int:
    """Output length giving requests of about `REQUEST_S` at ``token_rate``."""
    return max(16, round(REQUEST_S * token_rate))


def measure_level(
    streams: int,
    *,
    token_rate: float,
    seconds: float,
    workers: int = 1,
    lockstep: bool = False,
    workdir: Path,
    engine_factory: EngineFactory | None = None,
    options: EngineOptions | None = None,
) -> LevelResult:
    """Run ``streams`` paced streams through the real engine (or ``engine_factory``'s: tests) for a warm-up
    plus ``seconds`` and measure. ``options``: the engine's (default: no server-metrics scraping, since the
    paced server has no /metrics and the measurement should hold nothing but the engine)."""
    from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
    from tui.sim.paced import FIRST_TOKEN_S, paced_server

    if engine_factory is None:
        from tui.engine.host.handle import EngineHandle

        engine_factory = EngineHandle

    workdir.mkdir(parents=True, exist_ok=True)
    truth = workdir / f"truth-{streams}x{workers}.jsonl"
    requests = workdir / f"requests-{streams}x{workers}.jsonl"
    for path in (truth, requests):
        path.unlink(missing_ok=True)
    osl = output_tokens_for(token_rate)
    duration_s = FIRST_TOKEN_S + 0.5 / token_rate + osl / token_rate
    load = LoadTarget(mode="rate", rate=streams / duration_s, arrival="constant")
    with paced_server(token_rate, truth, lockstep=lockstep) as server:
        target = TargetConfig(base_url=server.url, model="sim-paced", timeout_s=60.0)
        workload = WorkloadConfig(isl=16, osl=osl)
        options = options or EngineOptions(server_metrics=False)
        handle = engine_factory(
            target, workload, load, workers=workers, requests_log=requests, options=options
        )
        handle.start()
        try:
            if not handle.wait_ready(30.0) or handle.fatal:
                fatal = handle.fatal or "the engine did not start within 30 s"
                return LevelResult(
                    streams, workers, ErrorStats.of(np.zeros(0)), 0.0, 0, 0.0, 0.0, False, fatal
                )
            # Warm-up: one request duration to fill up to `streams` in flight, one more to settle.
            warm_s = 2 * duration_s + 0.5
            probe = FloorProbe(seconds, start_at=time.perf_counter() + warm_s)
            _sleep_watching(handle, warm_s, None)
            lo = time.perf_counter_ns()
            health: list[tuple[float, float, bool]] = []
            failed0 = handle.snapshot().failed
            _sleep_watching(handle, seconds, health)
            hi = time.perf_counter_ns()
            snap = handle.snapshot()
            floor = probe.result()
        finally:
            handle.stop(timeout_s=5.0)
    joined = join_files(truth, requests, window_ns=(lo, hi))
    errors = joined.summary()
    lag = max((h[0] for h in health), default=0.0)
    cpu = max((h[1] for h in health), default=0.0)
    return LevelResult(
        streams=streams,
        workers=workers,
        errors=errors,
        chunks_per_s=errors.chunks / ((hi - lo) / 1e9),
        failed=snap.failed - failed0,
        loop_lag_p99_ms=lag,
        cpu_share=cpu,
        saturated=any(h[2] for h in health),
        fatal=snap.fatal,
        floor_p99_ms=floor.probe_p99_ms if floor is not None else float("nan"),
    )


def _sleep_watching(handle: Engine, seconds: float, health: list[tuple[float, float, bool]] | None) -> None:
    """Wait ``seconds``, reading a snapshot every 0.25 s like a face (recording client health if asked)."""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(0.25, left))
        snap = handle.snapshot()
        if health is not None:
            h = snap.health
            health.append((h.loop_lag_p99_ms, h.cpu_share, h.saturated))


# --- the search ---------------------------------------------------------------------------------


def stream_levels(max_streams: int) -> list[int]:
    """25, 50, 100, ... doubling, capped at (and ending with) ``max_streams``."""
    levels = []
    n = min(FIRST_LEVEL, max_streams)
    while n < max_streams:
        levels.append(n)
        n *= 2
    levels.append(max_streams)
    return levels


def search(
    measure: Callable[[int], LevelResult],
    max_streams: int,
    p99_budget_ms: float,
    *,
    bisect_steps: int = 2,
    on_level: Callable[[LevelResult], None] | None = None,
) -> tuple[int, list[LevelResult]]:
    """Double the stream count until a level is not accurate, then bisect ``bisect_steps`` times between the
    last good and the first bad count. Returns (most streams found accurate, 0 if none; every level run)."""
    results: list[LevelResult] = []

    def run(n: int) -> bool:
        r = measure(n)
        results.append(r)
        if on_level is not None:
            on_level(r)
        return r.accurate(p99_budget_ms)

    good, bad = 0, None
    for n in stream_levels(max_streams):
        if len(results) >= MAX_LEVELS:
            break
        if run(n):
            good = n
        else:
            bad = n
            break
    for _ in range(bisect_steps):
        if bad is None or len(results) >= MAX_LEVELS:
            break
        low = max(good, 1)
        mid = round((low + bad) / 2 / 5) * 5 if bad - low > 10 else (low + bad) // 2
        if mid <= good or mid >= bad:
            break
        if run(mid):
            good = mid
        else:
            bad = mid
    return good, results
