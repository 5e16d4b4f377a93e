"""`tokentop calibrate`: how many streams this machine can time accurately, measured against the truth.

A load generator that cannot keep up stamps chunks late and reports the server as slower than it is. Here a
paced local server (`tui.sim.paced`: every stream one token per ``1 / token_rate`` s on its own timeline, each
chunk stamped with `time.perf_counter_ns()` just before its socket write) streams to the real engine
(`EngineHandle`, worker processes and all) at increasing stream counts. The requests log and the server's
truth log are joined on the ``x-tokentop-request-id`` header, and for every chunk after the first:

    client-added ITL error = (client gap between this chunk and the last) - (server gap between their writes)

Its median is the bias the client adds to ITL, its p99 (of the absolute value) the spread. A level is
*accurate* when p99 <= the budget (``--p99-budget-ms``, 3 by default), the median is within 0.1 ms and no
request failed. The engine's own self-diagnosis (event-loop lag p99, CPU share, the "saturated" flag) is shown
beside it, so one can see how well the cheap in-process signal predicts the measured error.

Streams are offered open-loop at a constant rate of ``streams / request duration``, so exactly ``streams``
are in flight in steady state, their starts spread evenly (a closed loop started all at once would start and
end every request in the same few milliseconds, forever: a herd that measures nothing but itself).
Levels double (25, 50, 100, ...) up to ``--max-streams`` until one fails, then two bisection steps narrow
the answer; each level takes about ``--step-duration`` + 5 s. The run is bounded: at most 12 levels.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

P50_LIMIT_MS = 0.1
"""A level's median client-added error must be within this (the bias the client adds to ITL)."""
FIRST_LEVEL = 25
MAX_LEVELS = 12
REQUEST_S = 2.5
MAX_TOKEN_RATE = 2000.0
"""Tokens/s per stream the paced server is asked for at most (real servers stream well below this)."""
"""Each request lasts about this long (its output length is set from the token rate)."""


# --- joining the two logs -----------------------------------------------------------------------


def read_jsonl(path: Path) -> Iterable[dict[str, Any]]:
    """The objects of a JSON-lines file (a torn last line, from a writer stopped mid-line, is skipped)."""
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(obj, dict):
                    yield obj


@dataclass(frozen=True)
class JoinedErrors:
    """Client-added ITL errors from joining a requests log with a server truth log."""

    errors_ns: np.ndarray
    """One per chunk gap: client gap minus server gap (ns; positive: the client saw the gap longer)."""
    requests: int
    """Requests matched on both sides."""
    unmatched: int
    """Finished requests with no truth record, or whose chunk counts disagree."""

    def summary(self) -> ErrorStats:
        return ErrorStats.of(self.errors_ns, self.requests, self.unmatched)


@dataclass(frozen=True)
class ErrorStats:
    """Percentiles of the client-added ITL error (ms)."""

    chunks: int
    requests: int
    unmatched: int
    p50_ms: float
    """Median of the signed error (the bias)."""
    p99_abs_ms: float
    """99th percentile of the absolute error (the spread)."""
    max_abs_ms: float

    @classmethod
    def of(cls, errors_ns: np.ndarray, requests: int = 0, unmatched: int = 0) -> ErrorStats:
        if errors_ns.size == 0:
            nan = float("nan")
            return cls(0, requests, unmatched, nan, nan, nan)
        ms = errors_ns / 1e6
        absolute = np.abs(ms)
        return cls(
            chunks=int(ms.size),
            requests=requests,
            unmatched=unmatched,
            p50_ms=float(np.percentile(ms, 50)),
            p99_abs_ms=float(np.percentile(absolute, 99)),
            max_abs_ms=float(absolute.max()),
        )


def join_errors(
    truth: Iterable[dict[str, Any]],
    requests: Iterable[dict[str, Any]],
    *,
    window_ns: tuple[int, int] | None = None,
) -> JoinedErrors:
    """Join server truth records and client request records on ``client_request_id``; return every chunk
    gap's client-added error. With ``window_ns``, only gaps whose two server writes both fall inside it count.

    A request the client finished (``ok``) must have exactly as many chunks on both sides, or it is counted
    as unmatched and skipped; a cancelled or failed one contributes the chunks both sides saw (TCP keeps
    their order, so the client's chunks are a prefix of the server's).
    """
    server: dict[str, np.ndarray] = {}
    for rec in truth:
        rid = rec.get("client_request_id")
        chunks = rec.get("chunk_ns") or []
        if rid is not None and len(chunks) >= 2:
            server[str(rid)] = np.asarray(chunks, dtype=np.int64)
    parts: list[np.ndarray] = []
    matched = unmatched = 0
    for rec in requests:
        client = rec.get("chunk_ns") or []
        sn = server.get(str(rec.get("client_request_id")))
        if sn is None:
            if rec.get("status") == "ok":
                unmatched += 1
            continue
        cn = np.asarray(client, dtype=np.int64)
        if rec.get("status") == "ok" and cn.size != sn.size:
            unmatched += 1
            continue
        n = min(cn.size, sn.size)
        if n < 2:
            continue
        matched += 1
        cn, sn = cn[:n], sn[:n]
        err = np.diff(cn) - np.diff(sn)
        if window_ns is not None:
            lo, hi = window_ns
            keep = (sn[:-1] >= lo) & (sn[1:] <= hi)
            err = err[keep]
        parts.append(err)
    errors = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return JoinedErrors(errors, matched, unmatched)


def join_files(
    truth_path: Path, requests_path: Path, *, window_ns: tuple[int, int] | None = None
) -> JoinedErrors:
    """`join_errors` over the two JSON-lines files."""
    return join_errors(read_jsonl(truth_path), read_jsonl(requests_path), window_ns=window_ns)


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
    from tui.engine.health import LoopLagMonitor

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
            "import json, time; from tui.calibrate import noise_floor; "
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
) -> LevelResult:
    """Run ``streams`` paced streams through the real engine for a warm-up plus ``seconds`` and measure."""
    from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
    from tui.engine.handle import EngineHandle
    from tui.sim.paced import FIRST_TOKEN_S, paced_server

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
        handle = EngineHandle(target, workload, load, workers=workers, requests_log=requests)
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


def _sleep_watching(handle: Any, seconds: float, health: list[tuple[float, float, bool]] | None) -> None:
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


def run_from_args(ns: argparse.Namespace) -> int:
    """`tokentop calibrate`: exit 0 with an answer, 1 if nothing could be measured."""
    rate: float = ns.token_rate
    budget: float = ns.p99_budget_ms
    workers: int = ns.workers
    max_streams: int = ns.max_streams
    seconds: float = ns.step_duration
    lockstep: bool = getattr(ns, "lockstep", False)
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
                n, token_rate=rate, seconds=seconds, workers=workers, lockstep=lockstep, workdir=Path(tmp)
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
