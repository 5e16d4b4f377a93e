"""HTTP/1.1 over a raw asyncio.Protocol: request parsing, response heads and chunked-transfer framing.

Knows nothing of OpenAI: a connection hands each parsed request to its `RequestHandler` and serves the next
only when the handler calls `response_done`. Requests on one connection are served in order; keep-alive is the
HTTP/1.1 default and `Connection: close` is honoured. Request bodies need Content-Length (no chunked uploads).

Like uvicorn (`timeout_keep_alive`, 5 s by default, under vLLM and SGLang), a connection left idle for
`keep_alive_s` (no response in progress, no byte of a next request) is closed, so clients meet stale pooled
connections here as they do on real servers. It costs one `call_later` per idle spell, nothing per chunk.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

_MAX_HEAD_BYTES = 64 * 1024
_MAX_BODY_BYTES = 32 * 1024 * 1024

_REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


class InFlight(Protocol):
    """The response a connection is waiting on; told when the connection closes first."""

    def client_gone(self) -> None:
        """The connection closed before the response ended."""
        ...


class RequestHandler(Protocol):
    """What a connection hands its requests to (the simulator)."""

    connections: set[HttpProtocol]

    def handle(
        self,
        proto: HttpProtocol,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
        keep_alive: bool,
    ) -> None:
        """Answer one parsed request; call `proto.response_done` when the response has ended."""
        ...

    def error_body(self, status: int, message: str) -> bytes:
        """The body of an error the connection answers itself (malformed or oversized requests)."""
        ...


def response(
    status: int,
    body: bytes,
    *,
    keep_alive: bool,
    content_type: str = "application/json",
    headers: tuple[tuple[str, str], ...] = (),
) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}",
        f"content-type: {content_type}",
        f"content-length: {len(body)}",
        "server: tokentop-sim",
    ]
    lines += [f"{name}: {value}" for name, value in headers]
    if not keep_alive:
        lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def stream_head(request_id: str, *, keep_alive: bool) -> bytes:
    close = "connection: close\r\n" if not keep_alive else ""
    return (
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\n"
        f"transfer-encoding: chunked\r\nserver: tokentop-sim\r\nx-request-id: {request_id}\r\n{close}\r\n"
    ).encode("latin-1")


def frame(event_json: bytes) -> bytes:
    """One SSE event (`data: ...\\n\\n`) as one HTTP chunk."""
    payload = b"data: " + event_json + b"\n\n"
    return b"%x\r\n%b\r\n" % (len(payload), payload)


class HttpProtocol(asyncio.Protocol):
    """One client connection: parses requests (request line, headers, Content-Length body) one at a time."""

    def __init__(self, handler: RequestHandler, keep_alive_s: float = 0.0) -> None:
        self.handler = handler
        self.keep_alive_s = keep_alive_s
        """Close the connection after this long idle; 0: never."""
        self._idle_timer: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set in connection_made
        self.buffer = bytearray()
        self.busy = False
        self.closed = False
        self.current: InFlight | None = None
        self.request_ns = 0
        """When the first bytes of the request being parsed were read: its arrival for the truth log."""
        self._continue_sent = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.handler.connections.add(self)
        self._arm_idle_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_idle_timer()
        self.handler.connections.discard(self)
        current, self.current = self.current, None
        if current is not None:
            current.client_gone()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if self._idle_timer is not None:  # bytes of a request: no longer idle
            self._idle_timer.cancel()
            self._idle_timer = None
        if not self.buffer:
            self.request_ns = time.perf_counter_ns()
        self.buffer += data
        if len(self.buffer) > _MAX_HEAD_BYTES + _MAX_BODY_BYTES:  # a client pipelining without reading
            self.abort()
            return
        if not self.busy:
            self._process()

    def close(self) -> None:
        """Close after what was written is flushed."""
        self.current = None
        self.closed = True
        self._cancel_idle_timer()
        self.transport.close()

    def abort(self) -> None:
        self.transport.abort()

    def send(self, data: bytes, keep_alive: bool) -> None:
        """Write a whole response and finish it."""
        if not self.closed:
            self.transport.write(data)
        self.response_done(keep_alive)

    def response_done(self, keep_alive: bool) -> None:
        self.busy = False
        self.current = None
        if not keep_alive:
            self.close()
        elif self.buffer:
            asyncio.get_running_loop().call_soon(self._process)
        else:
            self._arm_idle_timer()

    def _arm_idle_timer(self) -> None:
        """Start the idle clock: called when the connection opens and when a response ends with nothing
        of the next request read yet."""
        if self.keep_alive_s > 0 and self._idle_timer is None and not self.closed:
            loop = asyncio.get_running_loop()
            self._idle_timer = loop.call_later(self.keep_alive_s, self._idle_timeout)

    def _cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle_timeout(self) -> None:
        self._idle_timer = None
        # The timer is cancelled whenever request bytes arrive and armed only between responses, so these
        # hold; checked anyway so that a stream in progress can never be cut by it.
        if not self.busy and not self.buffer and not self.closed:
            self.close()

    def _error(self, status: int, message: str) -> None:
        self.busy = True
        self.buffer.clear()
        self.send(response(status, self.handler.error_body(status, message), keep_alive=False), False)

    def _process(self) -> None:
        """Parse one complete request from the buffer, if there is one, and hand it to the simulator."""
        if self.busy or self.closed:
            return
        buf = self.buffer
        while buf[:2] == b"\r\n":  # tolerate stray CRLF between requests (RFC 9112 2.2)
            del buf[:2]
        if not buf:  # only stray CRLFs: still idle
            self._arm_idle_timer()
            return
        head_end = buf.find(b"\r\n\r\n")
        if head_end < 0:
            if len(buf) > _MAX_HEAD_BYTES:
                self._error(431, "request head too large")
            return
        lines = bytes(buf[:head_end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._error(400, "malformed request line")
            return
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                self._error(400, "malformed header line")
                return
            headers[name.strip().lower()] = value.strip()
        if "transfer-encoding" in headers:
            self._error(501, "chunked request bodies are not supported; send Content-Length")
            return
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            length = -1
        if length < 0:
            self._error(400, "bad Content-Length")
            return
        if length > _MAX_BODY_BYTES:
            self._error(413, "request body too large")
            return
        body_end = head_end + 4 + length
        if len(buf) < body_end:
            if headers.get("expect", "").lower() == "100-continue" and not self._continue_sent:
                self._continue_sent = True
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return
        body = bytes(buf[head_end + 4 : body_end])
        del buf[:body_end]
        self._continue_sent = False
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        self.busy = True
        self.handler.handle(self, method, target, headers, body, keep_alive)
