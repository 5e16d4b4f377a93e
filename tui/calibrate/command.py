"""`tokentop calibrate`: the command line face of the search (prints the table and the answer)."""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from tui.calibrate.floor import noise_floor
from tui.calibrate.stream_search import LevelResult, measure_level, search
from tui.configs import CalibrateConfig

if TYPE_CHECKING:
    from tui.engine.api import EngineFactory

MAX_TOKEN_RATE = 2000.0
"""Tokens/s per stream the paced server is asked for at most (real servers stream well below this)."""


# --- the command --------------------------------------------------------------------------------


def _row(r: LevelResult, budget_ms: float) -> str:
    e = r.errors
    verdict = "ok" if r.accurate(budget_ms) else "NOT accurate"
    if r.fatal:
        return f"{r.streams:>8} {'':>7} error: {r.fatal}"
    per_worker = r.streams / r.workers
    return (
        f"{r.streams:>8} {per_worker:>7.0f} {r.chunks_per_s:>9,.0f} {e.p50_ms:>+8.3f} {e.p99_abs_ms:>8.2f} "
        f"{r.loop_lag_p99_ms:>8.2f} {r.floor_p99_ms:>6.2f} {r.cpu_share:>5.0%} "
        f"{'yes' if r.saturated else 'no':>5} {r.failed:>5}  {verdict}"
    )


HEADER = (
    f"{'streams':>8} {'/worker':>7} {'chunks/s':>9} {'err p50':>8} {'err p99':>8} {'lag p99':>8} "
    f"{'floor':>6} {'CPU':>5} {'sat.':>5} {'fail':>5}"
)


def run(config: CalibrateConfig, *, engine_factory: EngineFactory | None = None) -> int:
    """`tokentop calibrate`: exit 0 with an answer, 1 if nothing could be measured. ``engine_factory``:
    the engine measured (default `EngineHandle`, the real one; a test may give a fake)."""
    rate, budget, workers = config.token_rate, config.p99_budget_ms, config.workers
    max_streams, seconds, lockstep = config.max_streams, config.step_duration_s, config.lockstep
    if rate > MAX_TOKEN_RATE:
        print(
            f"tokentop: error: --token-rate above {MAX_TOKEN_RATE:g} tok/s per stream is not supported",
            file=sys.stderr,
        )
        return 2
    if seconds > 600:
        print("tokentop: error: --step-duration above 600 s is not supported", file=sys.stderr)
        return 2
    floor = noise_floor(1.0)
    print(
        f"tokentop calibrate: {rate:g} tok/s per stream, {workers} worker(s), p99 budget {budget:g} ms, "
        f"{seconds:g} s per level{', lockstep' if lockstep else ''}"
    )
    print(f"noise floor: {floor.line()}")
    print(
        "err: client-added ITL error = client chunk gap - server write gap (ms; p99 of |error|); lag p99: "
        "the engine's loop-lag probe; floor: the same probe on a bare loop in another process meanwhile"
    )
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="tokentop-calibrate-") as tmp:

        def measure(n: int) -> LevelResult:
            return measure_level(
                n,
                token_rate=rate,
                seconds=seconds,
                workers=workers,
                lockstep=lockstep,
                workdir=Path(tmp),
                engine_factory=engine_factory,
            )

        try:
            best, results = search(
                measure, max_streams, budget, on_level=lambda r: print(_row(r, budget), flush=True)
            )
        except RuntimeError as exc:  # the paced server did not start
            print(f"tokentop: error: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 1
    fatal = next((r.fatal for r in results if r.fatal), None)
    if fatal and best == 0:
        print(f"tokentop: error: {fatal}", file=sys.stderr)
        return 1
    per = f" ({math.floor(best / workers)} per worker)" if workers > 1 else ""
    if best == 0:
        print(
            f"this machine cannot time even {results[0].streams} streams at {rate:g} tok/s within "
            f"p99 <= {budget:g} ms with {workers} worker(s)"
        )
    else:
        capped = " (the most tried: raise --max-streams)" if best >= max_streams else ""
        print(
            f"this machine can time {best} streams at {rate:g} tok/s within p99 <= {budget:g} ms "
            f"with {workers} worker(s){per}{capped}"
        )
    noisy = [r for r in results if not r.accurate(budget) and r.floor_p99_ms > budget / 2]
    if noisy:
        print(
            f"note: the machine itself was noisy while {noisy[0].streams} streams ran (a bare loop's lag "
            f"probe read p99 {noisy[0].floor_p99_ms:.1f} ms): other load may have cost this answer; "
            "rerun when the machine is quieter"
        )
    return 0
