"""Trace replay: the face's memory with a 1,000,000-line trace, and how close sends keep to their schedule.

1. Memory: writes a Mooncake trace of ``--lines`` lines (default 1,000,000; about 110 MB) to a temporary
   folder, checks it as the faces do (`check_trace`: the head only), then replays it against the simulator
   at ``--rate`` requests/s (the trace's own gaps are 1 ms, played at rate/1000) for ``--duration`` seconds,
   sampling the face's RSS (this process: the handle, its store and reader) and each worker's. Then the
   same file streamed through one `TraceFeed` end to end, to show a whole pass costs no memory either.
2. Schedule: the requests log of that replay: send (stamped just before the socket write) minus schedule,
   p50/p99/max, and the share of sends more than 1 ms late; and arrival minus schedule by the simulator's
   truth log (when the server read each request), the same figures.
3. The timing machinery alone (no HTTP): a worker's `TracePacer` at ``--rate`` on an event loop of its own,
   each due request held by the client's `wait_until_ns` as a real one is; how late each is released.

    PYTHONPATH=. python tests/perf/trace_replay.py [--lines 1000000] [--rate 200] [--duration 20] [--busy]

Not a pytest test (tests/perf is excluded from the suite).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

from tests.perf.trace_arrivals import busy_core
from tests.support.engine_helpers import joined
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, TraceConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.load.trace_pacing import TracePacer
from tui.engine.stream.hold import wait_until_ns
from tui.engine.traces import TraceFeed, TraceRequest, check_trace
from tui.engine.wire import WorkerShare
from tui.sim.launch import SimServer

MB = 1024 * 1024


def write_trace(path: Path, lines: int) -> None:
    """``lines`` requests 1 ms apart, 1-4 blocks from a few hundred chains, short outputs."""
    with path.open("w") as f:
        for i in range(lines):
            chain = (i * 7919) % 300
            ids = [chain * 10 + b for b in range(1 + i % 4)]
            f.write(json.dumps({"timestamp": i, "input_length": 48 * len(ids) - 7, "output_length": 4,
                                "hash_ids": ids}) + "\n")  # fmt: skip


def rss_mb(proc: psutil.Process) -> float:
    return float(proc.memory_info().rss) / MB


def machinery_lateness_ms(trace: TraceConfig, rate: float, seconds: float) -> np.ndarray:
    """Each request's release minus its time, with the replay and the client's hold and nothing else."""
    late: list[float] = []
    held: set[asyncio.Task[None]] = set()

    async def hold(due_ns: int) -> None:
        await wait_until_ns(due_ns)
        late.append((time.perf_counter_ns() - due_ns) / 1e6)

    async def send(share: WorkerShare, due_ns: int, entry: TraceRequest) -> None:
        task = asyncio.ensure_future(hold(due_ns))
        held.add(task)
        task.add_done_callback(held.discard)

    async def run() -> None:
        share = WorkerShare(level_id=1, mode="trace", speed=rate / 1000.0,
                            trace_anchor_ns=time.perf_counter_ns() + 10_000_000)  # fmt: skip
        replay = TracePacer(trace)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(replay.run(share, send), seconds)

    try:
        import uvloop

        uvloop.run(run())  # as the workers run
    except ImportError:
        asyncio.run(run())
    return np.array(late)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--skip-feed-pass", action="store_true", help="leave out the whole-file TraceFeed pass")
    ap.add_argument("--busy", action="store_true", help="keep one core busy with another process throughout")
    args = ap.parse_args()
    with busy_core(args.busy):
        run(args)


def run(args: argparse.Namespace) -> None:
    me = psutil.Process()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        t0 = time.perf_counter()
        write_trace(path, args.lines)
        print(f"trace: {args.lines:,} lines, {path.stat().st_size / MB:.0f} MB (written in "
              f"{time.perf_counter() - t0:.1f} s)")  # fmt: skip
        base_mb = rss_mb(me)
        trace = check_trace(TraceConfig(path=str(path), block_size=48))
        print(f"face RSS before the run {base_mb:.1f} MB, after check_trace {rss_mb(me):.1f} MB")
        log = Path(tmp) / "requests.jsonl"
        speed = args.rate / 1000.0
        truth_log = Path(tmp) / "truth.jsonl"
        with SimServer("flat", time_scale=20.0, truth_log=truth_log) as sim:
            handle = EngineHandle(
                TargetConfig(base_url=sim.url),
                WorkloadConfig(trace=trace),
                LoadTarget(mode="trace", speed=speed),
                workers=args.workers,
                requests_log=log,
                options=EngineOptions(server_metrics=False),
            )
            handle.start()
            assert handle.wait_ready(60), "engine did not start"
            face, workers = [], []
            end = time.monotonic() + args.duration
            while time.monotonic() < end:
                time.sleep(0.5)
                face.append(rss_mb(me))
                kids = me.children(recursive=True)
                sim_pid = sim.process.pid if sim.process is not None else -1
                workers.append(max((rss_mb(k) for k in kids if k.pid != sim_pid), default=0.0))
            snap = handle.snapshot()
            handle.stop(finish_in_flight=False, timeout_s=5.0)
        print(
            f"replay at {args.rate:g} req/s (x{speed:g}) for {args.duration:g} s: {snap.completed} "
            f"completed, {snap.failed} failed, about {snap.completed / args.rate:.0f} s of the trace's "
            f"{args.lines / 1000:.0f}"
        )
        for notice in snap.notices:
            print(f"notice: {notice}")
        print(f"face RSS: max {max(face):.1f} MB (the target: under 200 MB); "
              f"largest worker RSS: max {max(workers):.1f} MB")  # fmt: skip
        records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        # those the stop cancelled before their time were never sent: they have no send stamps
        sent = [r for r in records if r["scheduled_ns"] and r["send_start_ns"] is not None]
        lag = np.array([(r["sent_ns"] - r["scheduled_ns"]) / 1e6 for r in sent])
        start = np.array([(r["send_start_ns"] - r["scheduled_ns"]) / 1e6 for r in sent])
        arrival = np.array([(tr["arrival_ns"] - r["scheduled_ns"]) / 1e6
                            for r, tr in joined(log, truth_log) if r["scheduled_ns"]])  # fmt: skip
        for name, a in (("send - schedule", lag), ("send start - schedule", start),
                        ("arrival (truth log) - schedule", arrival)):  # fmt: skip
            print(
                f"{name}: p50 {np.percentile(a, 50):.3f} ms, p99 {np.percentile(a, 99):.3f} ms, "
                f"max {a.max():.3f} ms, {np.mean(a > 1.0) * 100:.2f}% over 1 ms ({a.size} sends)"
            )
        a = machinery_lateness_ms(trace, args.rate, min(args.duration, 10.0))
        print(
            f"replay + hold alone at {args.rate:g} req/s: release - schedule "
            f"p50 {np.percentile(a, 50):.3f} ms, p99 {np.percentile(a, 99):.3f} ms, "
            f"max {a.max():.3f} ms ({a.size} requests)"
        )
        if args.skip_feed_pass:
            return
        before = rss_mb(me)
        t0 = time.perf_counter()
        n = sum(1 for _ in TraceFeed(trace))
        took = time.perf_counter() - t0
        print(f"one TraceFeed pass: {n:,} requests in {took:.1f} s ({took / n * 1e6:.1f} us a line), "
              f"RSS {before:.1f} -> {rss_mb(me):.1f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
