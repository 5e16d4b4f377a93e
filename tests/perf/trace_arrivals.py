"""Arrival vs schedule by the simulator's truth log, for the replay test's scenario run many times.

The scenario of tests/integration/test_trace_replay.py (48 requests 15-60 ms apart, two workers, the
simulator's small-gpu profile at time scale 20, the ISL probe on), played at x1 then at x2 from the start,
``--runs`` times. Per run: the p99 of each pass, arrival (the simulator's truth log) minus schedule.
Over all runs: p50/p99/max of every request's arrival, and of the client's part of it (the send, stamped
just before the socket write, minus schedule). ``--busy`` keeps one core busy with another process
(``python3 -c "while 1: pass"``) throughout.

    PYTHONPATH=. python tests/perf/trace_arrivals.py [--runs 20] [--busy]

Not a pytest test (tests/perf is excluded from the suite).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from tests.integration.test_trace_replay import BLOCK, N, write_trace
from tests.support.engine_helpers import joined, running_handle, wait_for
from tui.engine.config import EngineOptions, LoadTarget, TraceConfig, WorkloadConfig
from tui.engine.traces import check_trace
from tui.sim.launch import SimServer


@contextlib.contextmanager
def busy_core(on: bool) -> Iterator[None]:
    """While the block runs, one core kept busy by another process (``--busy``); nothing when not ``on``."""
    busy = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if on else None
    try:
        yield
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


def one_run(tmp: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """Both passes of one run: (arrival - schedule, sent - schedule) in ms for each."""
    write_trace(tmp / "trace.jsonl")
    trace = check_trace(TraceConfig(path=str(tmp / "trace.jsonl"), block_size=BLOCK))
    truth_log = tmp / "truth.jsonl"
    with (
        SimServer("small-gpu", time_scale=20, truth_log=truth_log) as sim,
        running_handle(sim.url, LoadTarget(mode="trace", speed=1.0), tmp,
                       workload=WorkloadConfig(trace=trace), workers=2,
                       options=EngineOptions(isl_probe=True)) as handle,
    ):  # fmt: skip
        wait_for(handle, lambda s: s.completed + s.failed >= N and s.in_flight == 0, 60, "the first pass")
        handle.set_load(LoadTarget(mode="trace", speed=2.0, from_start=True))
        wait_for(handle, lambda s: s.completed + s.failed >= 2 * N and s.in_flight == 0, 60, "the x2 pass")
    pairs = joined(tmp / "requests.jsonl", truth_log)
    passes = []
    for level in (1, 2):
        mine = [p for p in pairs if p[0]["level"] == level]
        arrival = np.array([(tr["arrival_ns"] - rec["scheduled_ns"]) / 1e6 for rec, tr in mine])
        sent = np.array([(rec["sent_ns"] - rec["scheduled_ns"]) / 1e6 for rec, _ in mine])
        passes.append((arrival, sent))
    return passes


def figures(a: np.ndarray) -> str:
    return f"p50 {np.percentile(a, 50):.2f} ms, p99 {np.percentile(a, 99):.2f} ms, max {a.max():.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--busy", action="store_true", help="keep one core busy with another process")
    args = ap.parse_args()
    arrivals, sents, pass_p99 = [], [], []
    with busy_core(args.busy):
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                passes = one_run(Path(tmp))
            for arrival, sent in passes:
                arrivals.append(arrival)
                sents.append(sent)
                pass_p99.append(float(np.percentile(arrival, 99)))
            last = ", ".join(f"{p:.2f}" for p in pass_p99[-2:])
            print(f"run {run + 1}: arrival p99 of the passes {last} ms; load {os.getloadavg()[0]:.1f}")
    p99s = np.array(pass_p99)
    print(f"{'busy core' if args.busy else 'no busy core'}, {args.runs} runs, {p99s.size} passes of {N}:")
    print(f"  arrival - schedule, every request: {figures(np.concatenate(arrivals))}")
    print(f"  sent - schedule:                   {figures(np.concatenate(sents))}")
    print(f"  p99 of a pass: median {np.median(p99s):.2f} ms, worst {p99s.max():.2f} ms, "
          f"{np.mean(p99s < 2.0) * 100:.0f}% under 2 ms")  # fmt: skip
    p99 = float(np.percentile(np.concatenate(arrivals), 99))
    print(f"  the target, arrival p99 within 2 ms over every request: {'met' if p99 <= 2.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
