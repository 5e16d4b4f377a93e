"""CPU per streamed SSE chunk for each way of reading the stream: which transport and parser the engine uses.

One client process drives N paced streams (`tui.sim.paced`: each stream one token every 1/R s on its own
timeline, one chunk per read, as a live server sends them) and measures its own CPU time (user + system) over
the chunks it received. Variants:

- ``protocol``: a bare ``asyncio.Protocol`` that counts chunks without parsing (the event loop's own floor)
- ``httpx``: stock httpx (httpcore + h11), ``aiter_raw``, our SSE decoder, ``json.loads``
- ``httpx+orjson``: the same with ``orjson.loads``
- ``aiohttp-tx``: httpx over httpx-aiohttp's ``AiohttpTransport``, our decoder, orjson
- ``aiohttp-tx-noread``: the same without a read timeout (aiohttp re-arms its ``sock_read`` timer on every
  chunk; without it the silence limit would have to be enforced another way)
- ``aiohttp``: aiohttp directly (``content.iter_any``), our decoder, orjson (the floor)
- ``engine``: the engine's real path (`tui.engine.stream.client.run_request`: transport as configured,
  decoder, orjson, `apply_chunk` into the accumulator, socket stamps): by default the protocol path
  (`tui.engine.stream.h1`, httptools, decoding in ``data_received``)
- ``engine-aiohttp``, ``engine-httpx``: the same over the httpx client, as ``TOKENTOP_TRANSPORT`` selects
- ``before``: ``engine`` from another checkout (``--before DIR``: its ``tui``, its default path), in this run

Requests are long (``--tokens`` 1000 by default) so the per-request cost is spread thin; ``--tokens 100``
shows it included. Each variant runs in a fresh process, one after another; the server runs in its own
process. ``--rounds N`` runs the list N times, interleaved, so a busy machine's swings fall on every variant
alike; each row then also shows its ratio to the round's ``protocol`` floor, and the end the median ratios.

    /work/venv/bin/python tests/perf/transport_cost.py [--streams 200] [--token-rate 50] [--seconds 6]
    /work/venv/bin/python tests/perf/transport_cost.py --variants engine --profile   # where the time goes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = (
    "protocol",
    "httpx",
    "httpx+orjson",
    "aiohttp-tx",
    "aiohttp-tx-noread",
    "aiohttp",
    "engine",
    "engine-aiohttp",
    "engine-httpx",
    "before",
)


def _body(tokens: int) -> bytes:
    return orjson.dumps(
        {
            "model": "sim-paced",
            "messages": [{"role": "user", "content": "time the client"}],
            "max_tokens": tokens,
            "stream": True,
        }
    )


class _Count:
    def __init__(self) -> None:
        self.chunks = 0
        self.requests = 0
        self.errors = 0


async def _user_httpx(
    client: Any, url: str, body: bytes, count: _Count, loads: Callable[[Any], Any], stop: asyncio.Event
) -> None:
    from tui.engine.stream.sse import SSEDecoder

    headers = {"content-type": "application/json", "accept-encoding": "identity"}
    while not stop.is_set():
        decoder = SSEDecoder()
        try:
            async with client.stream("POST", url, content=body, headers=headers) as response:
                async for data in response.aiter_raw():
                    time.perf_counter_ns()  # every variant stamps each read, as the engine does
                    for event in decoder.feed(data):
                        if event.data == "[DONE]":
                            break
                        loads(event.data)
                        count.chunks += 1
            count.requests += 1
        except Exception:
            count.errors += 1
            await asyncio.sleep(0.01)


async def _user_aiohttp(session: Any, url: str, body: bytes, count: _Count, stop: asyncio.Event) -> None:
    from tui.engine.stream.sse import SSEDecoder

    headers = {"content-type": "application/json", "accept-encoding": "identity"}
    loads = orjson.loads
    while not stop.is_set():
        decoder = SSEDecoder()
        try:
            async with session.post(url, data=body, headers=headers) as response:
                async for data in response.content.iter_any():
                    time.perf_counter_ns()
                    for event in decoder.feed(data):
                        if event.data == "[DONE]":
                            break
                        loads(event.data)
                        count.chunks += 1
            count.requests += 1
        except Exception:
            count.errors += 1
            await asyncio.sleep(0.01)


class _Proto(asyncio.Protocol):
    """Counts content chunks (``{"content":`` after the first) and re-sends at the end of each body."""

    def __init__(self, count: _Count, request: bytes, stop: asyncio.Event) -> None:
        self.count, self.request, self.stop = count, request, stop
        self.transport: asyncio.Transport | None = None
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        time.perf_counter_ns()
        self.count.chunks += data.count(b'"content":')
        if data.endswith(b"\r\n0\r\n\r\n"):
            self.count.requests += 1
            if not self.stop.is_set() and self.transport is not None:
                self.transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _user_protocol(base_url: str, body: bytes, count: _Count, stop: asyncio.Event) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    request = (
        f"POST {parts.path}/chat/completions HTTP/1.1\r\nhost: {parts.hostname}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    loop = asyncio.get_running_loop()
    transport, _proto = await loop.create_connection(
        lambda: _Proto(count, request, stop), parts.hostname or "127.0.0.1", parts.port or 80
    )
    try:
        await stop.wait()
    finally:
        transport.abort()


async def _user_engine(session: Any, count: _Count, stop: asyncio.Event, live: list[Any]) -> None:
    from tui.engine.records import RequestRecord
    from tui.engine.stream.client import run_request
    from tui.engine.stream.openai import StreamAccumulator

    seq = 0
    while not stop.is_set():
        record = RequestRecord(request_id=seq, worker=0, seq=seq, level_id=1, sent_ns=time.perf_counter_ns())
        seq += 1
        acc = StreamAccumulator()
        live.append(acc)
        await run_request(session, record, acc)
        live.remove(acc)
        count.chunks += len(acc.chunk_ns)
        if record.status == "ok":
            count.requests += 1
        else:
            count.errors += 1


async def _client(
    variant: str, base_url: str, streams: int, tokens: int, warm_s: float, seconds: float
) -> dict[str, Any]:
    import httpx

    url = base_url + "/chat/completions"
    body = _body(tokens)
    count = _Count()
    stop = asyncio.Event()
    timeout = httpx.Timeout(60.0)
    closer: Callable[[], Any]

    def chunks_now() -> int:
        return count.chunks

    if variant == "protocol":
        users = [_user_protocol(base_url, body, count, stop) for _ in range(streams)]

        async def nothing() -> None:
            return None

        closer = nothing
    elif variant in ("httpx", "httpx+orjson"):
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        client = httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False)
        loads = json.loads if variant == "httpx" else orjson.loads
        users = [_user_httpx(client, url, body, count, loads, stop) for _ in range(streams)]
        closer = client.aclose
    elif variant in ("aiohttp-tx", "aiohttp-tx-noread"):
        import aiohttp
        from httpx_aiohttp import AiohttpTransport

        def session() -> aiohttp.ClientSession:
            return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, limit_per_host=0))

        if variant == "aiohttp-tx-noread":
            timeout = httpx.Timeout(60.0, read=None)
        client = httpx.AsyncClient(
            transport=AiohttpTransport(client=session), timeout=timeout, trust_env=False
        )
        users = [_user_httpx(client, url, body, count, orjson.loads, stop) for _ in range(streams)]
        closer = client.aclose
    elif variant == "aiohttp":
        import aiohttp

        sess = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, limit_per_host=0))
        users = [_user_aiohttp(sess, url, body, count, stop) for _ in range(streams)]
        closer = sess.close
    else:
        from tui.engine.config import TargetConfig, WorkloadConfig
        from tui.engine.stream.client import RequestSession
        from tui.engine.stream.transport import make_client

        target = TargetConfig(base_url=base_url, model="sim-paced", timeout_s=60.0)
        transport = variant.partition("-")[2] or None
        client = make_client(target, transport)
        chosen: dict[str, Any] = {} if transport is None else {"transport": transport}  # `before`: none
        rs = RequestSession(client, target, WorkloadConfig(isl=16, osl=tokens), "sim-paced", **chosen)
        live: list[Any] = []
        users = [_user_engine(rs, count, stop, live) for _ in range(streams)]

        async def closer() -> None:
            if hasattr(rs, "aclose"):
                await rs.aclose()
            await client.aclose()

        def chunks_now() -> int:
            for acc in live:
                acc.pending_text.clear()  # the worker takes lane text every batch
            return count.chunks + sum(len(acc.chunk_ns) for acc in live)

    tasks = [asyncio.ensure_future(u) for u in users]
    await asyncio.sleep(warm_s)
    c0, n0, t0 = time.process_time(), chunks_now(), time.perf_counter()
    await asyncio.sleep(seconds)
    c1, n1, t1 = time.process_time(), chunks_now(), time.perf_counter()
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await closer()
    chunks = n1 - n0
    return {
        "variant": variant,
        "chunks_per_s": chunks / (t1 - t0),
        "cpu_share": (c1 - c0) / (t1 - t0),
        "us_per_chunk": (c1 - c0) / chunks * 1e6 if chunks else float("nan"),
        "errors": count.errors,
    }


def parser_cost() -> dict[str, float]:
    """Microseconds per ``loads`` of one vLLM-style chat chunk, json vs orjson (best of 5)."""
    import timeit

    chunk = orjson.dumps({
        "id": "chatcmpl-5b1a6c0f0c8a4b6d9c2e7f1a3d4b5c6e", "object": "chat.completion.chunk",
        "created": 1735689600, "model": "meta-llama/Llama-3.1-8B-Instruct",
        "choices": [{"index": 0, "delta": {"content": " tok42"}, "logprobs": None, "finish_reason": None}],
    }).decode()  # fmt: skip
    n = 100_000
    return {
        name: min(timeit.repeat(lambda f=f: f(chunk), number=n, repeat=5)) / n * 1e6  # type: ignore[misc]
        for name, f in (("json", json.loads), ("orjson", orjson.loads))
    }


def _child(ns: argparse.Namespace) -> int:
    sys.path.insert(0, str(ns.root or ROOT))
    variant = "engine" if ns.child == "before" else ns.child
    coro = _client(variant, ns.url, ns.streams, ns.tokens, ns.warm, ns.seconds)
    if ns.uvloop:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    if ns.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        result = prof.runcall(asyncio.run, coro)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    else:
        result = asyncio.run(coro)
    print(json.dumps(result), flush=True)
    return 0


def _run_child(ns: argparse.Namespace, url: str, variant: str) -> dict[str, Any] | None:
    """One variant in a fresh process: its result, or None (said why) when it could not run."""
    cmd = [
        sys.executable, __file__, "--child", variant, "--url", url, "--streams", str(ns.streams),
        "--tokens", str(ns.tokens), "--seconds", str(ns.seconds), "--warm", str(ns.warm),
    ]  # fmt: skip
    if ns.profile:
        cmd.append("--profile")
    if ns.uvloop:
        cmd.append("--uvloop")
    env = None
    if variant == "before":
        if ns.before is None:
            print(f"{variant:<18} skipped: needs --before DIR")
            return None
        cmd += ["--root", str(ns.before)]
        env = {**os.environ, "PYTHONPATH": str(ns.before), "TOKENTOP_TRANSPORT": ""}
    out = subprocess.run(
        cmd,
        env=env,
        capture_output=not ns.profile,
        text=True,
        timeout=ns.seconds + ns.warm + 60,
        stdout=subprocess.PIPE if ns.profile else None,
    )
    lines = [line for line in (out.stdout or "").splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        err = (out.stderr or "").strip().splitlines()
        print(f"{variant:<18} failed: {err[-1] if err else out.returncode}")
        return None
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--token-rate", type=float, default=50.0)
    ap.add_argument("--tokens", type=int, default=1000, help="tokens per request")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--warm", type=float, default=2.0)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--lockstep", action="store_true", help="all streams emit together (a batched server)")
    ap.add_argument("--uvloop", action="store_true", help="run the clients on uvloop (must be importable)")
    ap.add_argument("--profile", action="store_true", help="cProfile the client (slower; top 25 to stderr)")
    ap.add_argument("--before", type=Path, help="the checkout the `before` variant runs")
    ap.add_argument("--rounds", type=int, default=1, help="run the variants this many times, interleaved")
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.child:
        return _child(ns)
    sys.path.insert(0, str(ROOT))
    from tui.sim.paced import paced_server

    variants = [v for v in ns.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        print(
            f"transport_cost: unknown variant(s) {', '.join(sorted(unknown))}; "
            f"choose from {', '.join(VARIANTS)}"
        )
        return 2
    offered = ns.streams * ns.token_rate
    print(
        f"{ns.streams} {'lockstep' if ns.lockstep else 'paced'} streams x {ns.token_rate:g} tok/s = "
        f"{offered:,.0f} chunks/s offered, {ns.tokens} tokens per request; {os.cpu_count()} CPUs, "
        f"python {sys.version.split()[0]}"
    )
    costs = parser_cost()
    print(
        f"parser: json.loads {costs['json']:.2f} us/chunk, orjson.loads {costs['orjson']:.2f} us/chunk "
        f"(saves {costs['json'] - costs['orjson']:.2f} us)"
    )
    print(f"{'variant':<18}{'chunks/s':>10}{'client CPU':>12}{'us/chunk':>10}{'errors':>8}{'x floor':>9}")
    ratios: dict[str, list[float]] = {}
    with paced_server(ns.token_rate, lockstep=ns.lockstep) as server:
        for round_ in range(ns.rounds):
            if ns.rounds > 1:
                print(f"round {round_ + 1}, load average {os.getloadavg()[0]:.1f}", flush=True)
            floor: float | None = None
            for variant in variants:
                r = _run_child(ns, server.url, variant)
                if r is None:
                    continue
                if variant == "protocol":
                    floor = r["us_per_chunk"]
                ratio = r["us_per_chunk"] / floor if floor else float("nan")
                if floor:
                    ratios.setdefault(variant, []).append(ratio)
                print(
                    f"{variant:<18}{r['chunks_per_s']:>10,.0f}{r['cpu_share']:>12.0%}{r['us_per_chunk']:>10.1f}"
                    f"{r['errors']:>8}{ratio:>8.2f}x",
                    flush=True,
                )
    if ns.rounds > 1:
        for variant, rs in ratios.items():
            each = ", ".join(f"{x:.2f}" for x in rs)
            print(f"{variant}: median {statistics.median(rs):.2f}x the floor ({each})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
