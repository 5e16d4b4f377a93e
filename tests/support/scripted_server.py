"""A tiny HTTP/1.1 server on 127.0.0.1 port 0 whose every response is scripted by the test.

Raw asyncio, no framework, so a test can send exactly the bytes it wants (hand-split SSE, CRLF, broken
chunked encoding, a stall, a close) and knows what the client sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    conn_index: int
    """Which accepted connection carried it (0, 1, ...): tells keep-alive reuse from a fresh connection."""


@dataclass
class Responder:
    writer: asyncio.StreamWriter
    chunked: bool = True
    keep_alive: bool = True
    closed: bool = False

    async def head(
        self, status: int = 200, headers: dict[str, str] | None = None, *, chunked: bool = True
    ) -> None:
        self.chunked = chunked
        lines = [f"HTTP/1.1 {status} X"]
        hdrs = {"content-type": "text/event-stream"}
        hdrs.update(headers or {})
        if chunked:
            hdrs["transfer-encoding"] = "chunked"
        for k, v in hdrs.items():
            lines.append(f"{k}: {v}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()

    async def send(self, data: bytes) -> None:
        if not data:
            return
        if self.chunked:
            self.writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        else:
            self.writer.write(data)
        await self.writer.drain()
        # give the client a chance to read this piece on its own
        await asyncio.sleep(0.002)

    async def end(self) -> None:
        if self.chunked:
            self.writer.write(b"0\r\n\r\n")
            await self.writer.drain()

    async def json(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        hdrs = {"content-type": "application/json", "content-length": str(len(body))}
        hdrs.update(headers or {})
        await self.head(status, hdrs, chunked=False)
        self.writer.write(body)
        await self.writer.drain()

    def abort(self) -> None:
        """Drop the connection right now."""
        self.closed = True
        self.writer.transport.abort()


Handler = Callable[[Request, Responder], Awaitable[None]]


@dataclass
class ScriptedServer:
    handler: Handler
    requests: list[Request] = field(default_factory=list)
    port: int = 0
    _server: asyncio.base_events.Server | None = None
    _conns: int = 0
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    tls: ssl.SSLContext | None = None
    """Serve HTTPS with this server-side context (the URL says https)."""

    async def start(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._on_conn, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/v1"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(BaseException):
                await t

    def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = self._conns
        self._conns += 1
        task = asyncio.ensure_future(self._serve(reader, writer, index))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                    return  # a TLS client that refused our certificate ends the handshake here
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = b""
                if "content-length" in headers:
                    body = await reader.readexactly(int(headers["content-length"]))
                req = Request(method, path, headers, body, index)
                self.requests.append(req)
                resp = Responder(writer)
                await self.handler(req, resp)
                if resp.closed:
                    return
        except (ConnectionError, ssl.SSLError, asyncio.CancelledError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()


class ThreadedServer:
    """A `ScriptedServer` on its own event loop in a thread: for a test whose own loop must stay free (a
    subprocess under test, or an app under Pilot that a busy server on its loop would slow down)."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self) -> ThreadedServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(10)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def sse(obj: dict[str, object] | str) -> bytes:
    """One SSE event for a JSON object (or a raw data string such as ``[DONE]``)."""
    import json

    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


def chat_chunk(
    content: str | None = None, *, reasoning: str | None = None, finish: str | None = None, role: bool = False
) -> dict[str, object]:
    delta: dict[str, object] = {}
    if role:
        delta["role"] = "assistant"
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    return {
        "id": "x",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def usage_chunk(prompt: int, completion: int) -> dict[str, object]:
    return {
        "id": "x",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def normal_stream(words: list[str], prompt_tokens: int = 7) -> list[bytes]:
    """The events of a well-formed chat stream: role, one chunk per word, finish, usage, [DONE]."""
    out = [sse(chat_chunk(role=True, content=""))]
    out += [sse(chat_chunk(w)) for w in words]
    out.append(sse(chat_chunk(finish="stop")))
    out.append(sse(usage_chunk(prompt_tokens, len(words))))
    out.append(sse("[DONE]"))
    return out
