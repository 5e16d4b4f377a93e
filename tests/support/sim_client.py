"""A lean raw-socket HTTP/1.1 client for the simulator's tests: exact bytes, exact arrival stamps.

Deliberately not tui.engine (the sim tests must not depend on the code they are used to test) and not httpx
(its buffering would blur arrival times and hide framing details such as a missing last chunk).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass
class Reply:
    """One HTTP response as received."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    events: list[tuple[int, bytes]] = field(default_factory=list)
    """(perf_counter_ns when its HTTP chunk was complete, SSE data payload) per event, in order."""
    error: str | None = None
    """None if the response ended properly, "eof" if the server closed early, "timeout" if it went silent."""
    sent_ns: int = 0

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def done(self) -> bool:
        """The stream ended with `data: [DONE]`."""
        return bool(self.events) and self.events[-1][1] == b"[DONE]"

    def chunks(self) -> list[dict[str, Any]]:
        """Every event parsed as JSON (not [DONE]); a malformed one raises."""
        return [orjson.loads(data) for _, data in self.events if data != b"[DONE]"]

    def text_events(self) -> list[tuple[int, str, str]]:
        """(arrival_ns, field, text) for every event carrying generated text: content, reasoning or text."""
        out = []
        for ns, data in self.events:
            if data == b"[DONE]":
                continue
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            for choice in chunk.get("choices", []):
                source = choice.get("delta", choice)
                for name in ("reasoning_content", "content", "text"):
                    if source.get(name):
                        out.append((ns, name, source[name]))
        return out


class Conn:
    """One keep-alive connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()

    async def send(
        self, method: str, path: str, body: object = None, *, headers: dict[str, str] | None = None
    ) -> int:
        data = b"" if body is None else body if isinstance(body, bytes) else orjson.dumps(body)
        lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1", f"content-length: {len(data)}"]
        if body is not None:
            lines.append("content-type: application/json")
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        sent_ns = time.perf_counter_ns()
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        await self.writer.drain()
        return sent_ns

    async def reply(self, *, idle_timeout_s: float = 10.0) -> Reply:
        """Read one response; a silence longer than `idle_timeout_s` ends it with error "timeout"."""
        reply = Reply()
        reader = self.reader

        async def read(coro: Any) -> bytes:
            return await asyncio.wait_for(coro, idle_timeout_s)

        try:
            head = await read(reader.readuntil(b"\r\n\r\n"))
            lines = head.decode("latin-1").split("\r\n")
            reply.status = int(lines[0].split(" ")[1])
            for line in lines[1:]:
                if ":" in line:
                    name, _, value = line.partition(":")
                    reply.headers[name.strip().lower()] = value.strip()
            if reply.status == 100:
                return await self.reply(idle_timeout_s=idle_timeout_s)
            if reply.headers.get("transfer-encoding") == "chunked":
                pending = b""
                while True:
                    size = int((await read(reader.readuntil(b"\r\n"))).strip(), 16)
                    if size == 0:
                        await read(reader.readuntil(b"\r\n"))
                        break
                    data = (await read(reader.readexactly(size + 2)))[:-2]
                    now = time.perf_counter_ns()
                    pending += data
                    while b"\n\n" in pending:
                        event, _, pending = pending.partition(b"\n\n")
                        if event.startswith(b"event: "):  # a named event (Responses, Messages)
                            event = event.partition(b"\n")[2]
                        if event.startswith(b"data: "):
                            reply.events.append((now, event[6:]))
            else:
                reply.body = await read(reader.readexactly(int(reply.headers.get("content-length", "0"))))
        except (asyncio.IncompleteReadError, ConnectionError):
            reply.error = "eof"
        except asyncio.TimeoutError:
            reply.error = "timeout"
        return reply

    async def call(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        headers: dict[str, str] | None = None,
        idle_timeout_s: float = 10.0,
    ) -> Reply:
        sent_ns = await self.send(method, path, body, headers=headers)
        reply = await self.reply(idle_timeout_s=idle_timeout_s)
        reply.sent_ns = sent_ns
        return reply


async def call(
    port: int,
    method: str,
    path: str,
    body: object = None,
    *,
    headers: dict[str, str] | None = None,
    idle_timeout_s: float = 10.0,
) -> Reply:
    """One request on a fresh connection."""
    conn = await Conn.open(port)
    try:
        return await conn.call(method, path, body, headers=headers, idle_timeout_s=idle_timeout_s)
    finally:
        await conn.close()


CHAT_TEMPLATE_TOKENS = 4 + 3
"""The simulator's chat template for one message: 4 around the message, 3 opening the reply."""


def chat_body(max_tokens: int = 16, *, words: int = 32, stream: bool = True, **extra: Any) -> dict[str, Any]:
    """A chat request of `words` one-token words (so ``words + CHAT_TEMPLATE_TOKENS`` prompt tokens by the
    simulator's count) that generates exactly `max_tokens` (ignore_eos)."""
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": " ".join(["word"] * words)}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    body.update(extra)
    return body
