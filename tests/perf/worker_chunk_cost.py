"""The engine worker's whole CPU per received chunk (stream path, lane deltas, arrivals, pickling), at N
paced streams: its process's user + system time over a measured span, divided by the chunks it received.

Run it once per tree to compare (``PYTHONPATH`` picks the tree; alternate the runs on a shared machine):

    PYTHONPATH=. python tests/perf/worker_chunk_cost.py [--streams 300] [--token-rate 50] [--seconds 8]
"""

from __future__ import annotations

import argparse
import os
import time

from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.sim.paced import paced_server


def _cpu_s(pid: int) -> float:
    """User + system seconds of process ``pid`` (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=300)
    ap.add_argument("--token-rate", type=float, default=50.0)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--warm", type=float, default=6.0)
    ns = ap.parse_args()
    with paced_server(ns.token_rate) as server:
        target = TargetConfig(base_url=server.start().url, model="sim-paced", timeout_s=60.0)
        handle = EngineHandle(
            target,
            WorkloadConfig(isl=16, osl=100_000),
            LoadTarget(concurrency=ns.streams),
            options=EngineOptions(server_metrics=False),
            probe=False,
        )
        handle.start()
        try:
            time.sleep(ns.warm)
            pid = handle._workers.pool._procs[0].pid  # type: ignore[attr-defined]  # the one local worker's process
            c0, k0 = _cpu_s(pid), _received(handle)
            time.sleep(ns.seconds)
            c1, k1 = _cpu_s(pid), _received(handle)
        finally:
            handle.stop(finish_in_flight=False, timeout_s=2.0)
    chunks = k1 - k0
    print(
        f"{ns.streams} streams x {ns.token_rate:g} tok/s: {chunks / ns.seconds:,.0f} chunks/s, "
        f"worker CPU {(c1 - c0) / ns.seconds:.0%} of a core, {(c1 - c0) / chunks * 1e6:.2f} us per chunk"
    )


def _received(handle: EngineHandle) -> float:
    """Tokens the worker reported so far (one per chunk from the paced server): the live gauge's ring, which
    keeps a minute of them, so the whole run while it is shorter than that."""
    with handle._lock:
        return float(handle.core.store.live.tokens.sum())


if __name__ == "__main__":
    main()
