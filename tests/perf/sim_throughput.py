"""How many concurrent streams and SSE chunks per second the simulator serves on one core.

The sim runs the `flat` profile (every stream gets 50 tok/s x time-scale at any load, one token per chunk),
so the offered load is exactly streams x 50 x time-scale chunks/s and any shortfall is the simulator (or the
client) falling behind. The sim is pinned to CPU 0 and a lean client process (asyncio.Protocol, counts chunks
without parsing them) to CPU 1, on machines with two or more CPUs. For each level it prints chunks/s offered
and received, the per-stream token rate, both processes' CPU use, and the sim's CPU cost per chunk (which
gives the ceiling on one core even when the client is what runs out first).

    /work/venv/bin/python tests/perf/sim_throughput.py [--levels 100,200,400,800,1600] [--duration 4]

Not a pytest test (tests/perf is excluded from the suite).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import orjson
import psutil

PATTERN = b'{"content":'
"""Starts every content delta (the role chunk's `"content":""` follows `"role"`, so it is not counted)."""
END = b"\r\n0\r\n\r\n"
"""The end of a chunked body."""


# --- the client (a child process) ---------------------------------------------------------------------------


class _Counts:
    def __init__(self) -> None:
        self.chunks = 0
        self.requests = 0
        self.running = True


class _Stream(asyncio.Protocol):
    """One keep-alive connection issuing one streamed request after another."""

    def __init__(self, counts: _Counts, request: bytes) -> None:
        self.counts = counts
        self.request = request
        self.carry = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        buf = self.carry + data
        self.counts.chunks += buf.count(PATTERN)
        self.carry = buf[-(len(PATTERN) - 1) :]
        if buf.endswith(END):
            self.counts.requests += 1
            if self.counts.running and self.transport is not None:
                self.transport.write(self.request)


async def _client(port: int, streams: int, warmup_s: float, duration_s: float, max_tokens: int) -> None:
    body = orjson.dumps({
        "messages": [{"role": "user", "content": "measure the simulator please"}],
        "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
    })  # fmt: skip
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body
    loop = asyncio.get_running_loop()
    counts = _Counts()
    transports = []
    for i in range(streams):
        transport, _ = await loop.create_connection(lambda: _Stream(counts, request), "127.0.0.1", port)
        transports.append(transport)
        if i % 50 == 49:
            await asyncio.sleep(0)  # let the first streams start while the rest connect
    await asyncio.sleep(warmup_s)
    me = psutil.Process()
    cpu0, chunks0, t0 = sum(me.cpu_times()[:2]), counts.chunks, time.perf_counter()
    print("start", flush=True)
    await asyncio.sleep(duration_s)
    cpu1, chunks1, t1 = sum(me.cpu_times()[:2]), counts.chunks, time.perf_counter()
    counts.running = False
    for transport in transports:
        transport.abort()
    result = {"chunks_per_s": (chunks1 - chunks0) / (t1 - t0), "client_cpu": (cpu1 - cpu0) / (t1 - t0)}
    print(orjson.dumps(result).decode(), flush=True)


# --- the driver ---------------------------------------------------------------------------------------------


def _pin(pid: int, cpu: int) -> bool:
    if len(os.sched_getaffinity(0)) < 2:
        return False
    os.sched_setaffinity(pid, {cpu})
    return True


def _level(port: int, sim: psutil.Process, streams: int, args: argparse.Namespace) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--client", str(port), "--streams", str(streams),
           "--warmup", str(args.warmup), "--duration", str(args.duration),
           "--max-tokens", str(args.max_tokens)]  # fmt: skip
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        _pin(child.pid, 1)
        assert child.stdout is not None
        line = child.stdout.readline()
        if line.strip() != "start":
            raise RuntimeError(f"client failed: {line!r}")
        cpu0, t0 = sum(sim.cpu_times()[:2]), time.perf_counter()
        line = child.stdout.readline()
        cpu1, t1 = sum(sim.cpu_times()[:2]), time.perf_counter()
        result: dict[str, float] = orjson.loads(line)
        result["sim_cpu"] = (cpu1 - cpu0) / (t1 - t0)
        return result
    finally:
        child.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--streams", type=int, default=100, help=argparse.SUPPRESS)
    parser.add_argument("--levels", default="100,200,400,800,1600", help="concurrent streams per level")
    parser.add_argument(
        "--time-scale", type=float, default=1.0, help="sim speed-up (tokens/s per stream = 50x)"
    )
    parser.add_argument("--warmup", type=float, default=2.0, metavar="S")
    parser.add_argument("--duration", type=float, default=4.0, metavar="S")
    parser.add_argument(
        "--max-tokens", type=int, default=200, help="tokens per request (then the next request)"
    )
    args = parser.parse_args()
    if args.client:
        asyncio.run(_client(args.client, args.streams, args.warmup, args.duration, args.max_tokens))
        return 0

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tui.sim.launch import SimServer

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(
        resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard)
    )  # inherited by both children
    levels = [int(x) for x in args.levels.split(",")]
    per_stream = 50.0 * args.time_scale
    with SimServer("flat", time_scale=args.time_scale) as server:
        assert server.process is not None
        pinned = _pin(server.process.pid, 0)
        sim = psutil.Process(server.process.pid)
        print(f"sim: profile flat, {per_stream:g} tok/s per stream, one token per chunk; "
              f"{'sim on CPU 0, client on CPU 1' if pinned else 'not pinned (one CPU)'}; "
              f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")  # fmt: skip
        print(f"{'streams':>8} {'offered/s':>10} {'chunks/s':>10} {'kept up':>8} {'tok/s/stream':>13} "
              f"{'sim CPU':>8} {'client CPU':>10} {'sim us/chunk':>13}")  # fmt: skip
        best = None
        for streams in levels:
            r = _level(server.port, sim, streams, args)
            offered = streams * per_stream
            kept = r["chunks_per_s"] / offered
            us_per_chunk = r["sim_cpu"] / r["chunks_per_s"] * 1e6 if r["chunks_per_s"] else float("nan")
            print(f"{streams:>8} {offered:>10,.0f} {r['chunks_per_s']:>10,.0f} {kept:>8.1%} "
                  f"{r['chunks_per_s'] / streams:>13.1f} {r['sim_cpu']:>8.0%} {r['client_cpu']:>10.0%} "
                  f"{us_per_chunk:>13.1f}", flush=True)  # fmt: skip
            if kept >= 0.97:
                best = (streams, r["chunks_per_s"], us_per_chunk)
        if best:
            print(f"kept up (>=97% of offered) to {best[0]} streams = {best[1]:,.0f} chunks/s; sim CPU "
                  f"{best[2]:.1f} us/chunk => ~{1e6 / best[2]:,.0f} chunks/s on a whole core")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
