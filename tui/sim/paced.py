"""A paced streaming server for calibration: every stream gets one token every ``1 / token_rate`` seconds.

The simulator's `flat` profile emits every stream's token in the same 20 ms engine step, so the client gets
one burst of N chunks per step; that measures burst handling, not the client's steady cost. Here each stream
runs on its own absolute timeline (first token after ``first_token_s`` plus a seeded random phase, then one
every interval), so N streams at R tok/s offer N x R evenly spread chunks per second and whatever timing error
the client shows is its own. ``lockstep=True`` puts every stream on one shared grid instead (all streams emit
together, like a batched server's decode step), the harder case.

Each chunk carrying text is stamped with `time.perf_counter_ns()` immediately before its `transport.write`
(CLOCK_MONOTONIC: comparable with the client's stamps in another process) and the truth log gets one JSON line
per request, in the simulator's format (`client_request_id` from the ``x-tokentop-request-id`` header,
`chunk_ns`, `chunk_tokens`, `arrival_ns`, `first_token_ns`, `end_ns`, `status`).

    python -m tui.sim.paced --port 0 --token-rate 50 --truth-log truth.jsonl [--lockstep]

prints ``tokentop sim: serving profile paced on http://127.0.0.1:PORT/v1`` when listening (the line
`tui.sim.launch.SimServer` waits for; `paced_server` builds such a launcher). Chat and completions, streamed
only; stdlib and orjson only. It is a `RequestHandler` on the simulator's HTTP/1.1 (`tui.sim.http`), so both
parse, keep alive and frame alike.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

import orjson

from tui.sim.http import HttpProtocol, response
from tui.sim.launch import SimServer

MODEL = "sim-paced"
FIRST_TOKEN_S = 0.02
"""Time from a request's arrival to its first token (plus the stream's random phase, up to one interval)."""
_DONE = b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"


def _frame(obj: dict[str, Any]) -> bytes:
    payload = b"data: " + orjson.dumps(obj) + b"\n\n"
    return b"%x\r\n%b\r\n" % (len(payload), payload)


class PacedConfig:
    """What the paced server serves."""

    def __init__(
        self,
        token_rate: float,
        *,
        first_token_s: float = FIRST_TOKEN_S,
        lockstep: bool = False,
        seed: int = 0,
        truth_log: IO[bytes] | None = None,
    ) -> None:
        self.interval_s = 1.0 / token_rate
        self.first_token_s = first_token_s
        self.lockstep = lockstep
        self.rng = random.Random(seed)
        self.truth_log = truth_log
        self.epoch = time.monotonic()


class _Stream:
    """One streamed answer: its timeline, its frames, its truth record."""

    __slots__ = (
        "arrival_ns",
        "chunk_ns",
        "client_request_id",
        "conn",
        "handle",
        "keep_alive",
        "max_tokens",
        "next_at",
        "prefix",
        "sent",
        "server",
        "suffix",
        "tail",
    )

    def __init__(
        self,
        server: _Server,
        conn: HttpProtocol,
        body: dict[str, Any],
        chat: bool,
        keep_alive: bool,
        client_request_id: str | None,
    ) -> None:
        self.server = server
        self.conn = conn
        self.keep_alive = keep_alive
        self.client_request_id = client_request_id
        self.arrival_ns = conn.request_ns
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 16
        self.max_tokens = max(1, int(max_tokens))
        self.sent = 0
        self.chunk_ns: list[int] = []
        self.handle: asyncio.TimerHandle | None = None
        created = int(time.time())
        rid = f"cmpl-paced-{server.next_id()}"
        kind = "chat.completion.chunk" if chat else "text_completion"
        head = {"id": rid, "object": kind, "created": created, "model": MODEL}
        delta: dict[str, Any] = {"delta": {"content": "@@"}} if chat else {"text": "@@"}
        before, _, after = orjson.dumps(
            {**head, "choices": [{"index": 0, **delta, "finish_reason": None}]}
        ).partition(b'"@@"')
        self.prefix, self.suffix = b"data: " + before, after + b"\n\n"
        end: dict[str, Any] = {"delta": {}} if chat else {"text": ""}
        tail = _frame({**head, "choices": [{"index": 0, **end, "finish_reason": "length"}]})
        options = body.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage"):
            usage = {
                "prompt_tokens": 1,
                "completion_tokens": self.max_tokens,
                "total_tokens": self.max_tokens + 1,
            }
            tail += _frame({**head, "choices": [], "usage": usage})
        self.tail = tail + _DONE
        cfg = server.config
        loop = asyncio.get_running_loop()
        first = loop.time() + cfg.first_token_s
        if cfg.lockstep:
            grid = cfg.epoch + math.ceil((first - cfg.epoch) / cfg.interval_s) * cfg.interval_s
            self.next_at = grid
        else:
            self.next_at = first + cfg.rng.random() * cfg.interval_s
        self.handle = loop.call_at(self.next_at, self._tick)

    def _tick(self) -> None:
        self.handle = None
        conn = self.conn
        if conn.closed:
            return
        cfg = self.server.config
        self.sent += 1
        payload = self.prefix + (b'" tok"' if self.sent > 1 else b'"tok"') + self.suffix
        data = b"%x\r\n%b\r\n" % (len(payload), payload)
        last = self.sent >= self.max_tokens
        if last:
            data += self.tail
        stamp = time.perf_counter_ns()
        conn.transport.write(data)
        self.chunk_ns.append(stamp)
        if last:
            self.finish("ok")
            conn.response_done(self.keep_alive)
            return
        # An absolute timeline: a late wake-up does not push the following tokens later.
        self.next_at += cfg.interval_s
        self.handle = asyncio.get_running_loop().call_at(self.next_at, self._tick)

    def client_gone(self) -> None:
        self.finish("disconnected")

    def finish(self, status: str) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        log = self.server.config.truth_log
        if log is None:
            return
        record = {
            "client_request_id": self.client_request_id,
            "id": None,
            "endpoint": "chat",
            "stream": True,
            "arrival_ns": self.arrival_ns,
            "admitted_ns": self.arrival_ns,
            "first_token_ns": self.chunk_ns[0] if self.chunk_ns else None,
            "chunk_ns": self.chunk_ns,
            "chunk_tokens": [1] * len(self.chunk_ns),
            "end_ns": time.perf_counter_ns(),
            "prompt_tokens": 1,
            "completion_tokens": self.sent,
            "status": status,
            "http_status": 200,
            "fault": None,
        }
        log.write(orjson.dumps(record) + b"\n")
        log.flush()


class _Server:
    """The paced server's `tui.sim.http.RequestHandler`: each connection's requests, one at a time."""

    def __init__(self, config: PacedConfig) -> None:
        self.config = config
        self.connections: set[HttpProtocol] = set()
        self._ids = 0

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def error_body(self, status: int, message: str) -> bytes:
        return orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})

    def handle(
        self,
        proto: HttpProtocol,
        method: str,
        target: str,
        headers: dict[str, str],
        raw: bytes,
        keep_alive: bool,
    ) -> None:
        path = target.partition("?")[0]
        if method == "GET" and path == "/v1/models":
            models = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "tokentop"}]}
            proto.send(response(200, orjson.dumps(models), keep_alive=keep_alive), keep_alive)
        elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            try:
                body = orjson.loads(raw)
                if not isinstance(body, dict) or not body.get("stream"):
                    raise ValueError("the paced server only streams")
            except ValueError as exc:
                proto.send(response(400, self.error_body(400, str(exc)), keep_alive=keep_alive), keep_alive)
                return
            proto.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            chat = path == "/v1/chat/completions"
            request_id = headers.get("x-tokentop-request-id")
            proto.current = _Stream(self, proto, body, chat, keep_alive, request_id)
        else:
            error = b'{"error": {"message": "not found", "type": "not_found"}}'
            proto.send(response(404, error, keep_alive=keep_alive), keep_alive)


async def serve(config: PacedConfig, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set; prints the ready line with the URL once listening."""
    loop = asyncio.get_running_loop()
    server = _Server(config)
    listener = await loop.create_server(lambda: HttpProtocol(server), host, port, backlog=4096)
    bound = listener.sockets[0].getsockname()[1]
    print(f"tokentop sim: serving profile paced on http://{host}:{bound}/v1", flush=True)
    try:
        await stop.wait()
    finally:
        listener.close()


def paced_server(
    token_rate: float, truth_log: Path | None = None, *, lockstep: bool = False, seed: int = 0
) -> SimServer:
    """A `SimServer` launcher (context manager, ``.url``) that runs this paced server instead of the sim."""
    server = SimServer("paced")
    args = ["--port", "0", "--token-rate", repr(float(token_rate)), "--seed", str(seed)]
    if truth_log is not None:
        args += ["--truth-log", str(truth_log)]
    if lockstep:
        args.append("--lockstep")
    server.args = [sys.executable, "-m", "tui.sim.paced", *args]
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.sim.paced", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token-rate", type=float, default=50.0, help="tokens/s of every stream")
    parser.add_argument("--first-token-ms", type=float, default=FIRST_TOKEN_S * 1e3)
    parser.add_argument("--lockstep", action="store_true", help="all streams emit together on one grid")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--truth-log", type=Path)
    ns = parser.parse_args(argv)
    if not ns.token_rate > 0:
        print("tokentop sim: error: --token-rate must be positive", file=sys.stderr)
        return 2
    log = ns.truth_log.open("ab") if ns.truth_log else None
    config = PacedConfig(
        ns.token_rate,
        first_token_s=ns.first_token_ms / 1e3,
        lockstep=ns.lockstep,
        seed=ns.seed,
        truth_log=log,
    )

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(config, ns.host, ns.port, stop)

    try:
        asyncio.run(run())
    except OSError as exc:
        print(
            f"tokentop sim: error: cannot listen on {ns.host}:{ns.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    finally:
        if log is not None:
            log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
