"""HTTP/1.1 response streams on a bare `asyncio.Protocol`, parsed by httptools (llhttp, as uvicorn uses).

Each read is stamped once in ``data_received`` and handed, with that stamp, to the request's `ResponseSink`
as status, headers and body bytes (chunked framing undone by the parser); nothing between the socket and the
sink but one C parser call. Connections are kept alive in an unbounded pool: a request never waits for one.
Failures reach the sink as the httpx exceptions `tui.engine.stream.error_class` classifies, with the same
words.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

import httptools
import httpx

MAX_HEADER_BYTES = 64 * 1024
"""A response's header section past this fails the request (a hostile or broken server cannot grow it)."""
KEEPALIVE_S = 15.0
"""An idle connection older than this is closed instead of reused (servers close theirs at 5-75 s)."""


class ResponseSink(Protocol):
    """What one request's response is delivered to; ``now`` is the `time.perf_counter_ns` of the read."""

    def head(self, status: int, headers: dict[str, str], now: int) -> None: ...

    def body(self, data: bytes) -> None:
        """Body bytes (chunked framing removed), called by the parser itself: the read's stamp is the
        connection's ``now``. Called on after the sink has its answer, while the rest of the body drains."""
        ...

    def end(self, now: int) -> None: ...

    def lost(self, exc: httpx.TransportError) -> None: ...


def _ignore(_data: bytes) -> None:
    return None


class Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request on it at a time."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.sink: ResponseSink | None = None
        self.parser: httptools.HttpResponseParser | None = None
        self.headers: dict[str, str] = {}
        self.now = 0
        """Stamp of the last read (or of the send, before any)."""
        self.received = False
        self.headers_done = False
        self.header_bytes = 0
        self.closed = False
        self.idle_since = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.on_body: Callable[[bytes], None] = _ignore
        self.drain_until_ns = 0
        """After the sink has its answer: when to give up waiting for the end of the body."""

    # --- one exchange ---------------------------------------------------------------------------

    def send(self, sink: ResponseSink, request: bytes) -> int:
        """Write ``request`` and deliver its response to ``sink``; returns the stamp taken just before the
        bytes go to the socket. Not after: on a shared machine the write wakes the server, which may take
        this core before the stamp, and the request would read as sent after the server read it."""
        self.sink = sink
        # httptools looks its callbacks up once, here: body bytes go straight to the sink, no hop between
        self.on_body = sink.body
        self.parser = httptools.HttpResponseParser(self)
        self.headers = {}
        self.header_bytes = 0
        self.received = self.headers_done = False
        self.drain_until_ns = 0
        assert self.transport is not None
        self.now = now = time.perf_counter_ns()
        self.transport.write(request)
        self._arm(self.pool.read_timeout_s)
        return now

    def drain(self) -> None:
        """The sink has what it needs: read on to the end of the body (normally just the chunked terminator)
        so the connection can be reused, for a moment at most (then it is dropped: `ResponseSink.lost`)."""
        self.drain_until_ns = time.perf_counter_ns() + int(self.pool.drain_s * 1e9)
        self._arm(self.pool.drain_s)

    def abort(self) -> None:
        """Drop the connection (a failed or cancelled request): its bytes are of no further use."""
        self.sink = None
        self.parser = None
        self.on_body = _ignore
        self._disarm()
        if self.transport is not None and not self.closed:
            self.transport.abort()
        self.closed = True
        self.pool.forget(self)

    # --- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.pool.opened(self)

    def data_received(self, data: bytes) -> None:
        self.now = time.perf_counter_ns()
        self.received = True
        parser = self.parser
        if parser is None:  # bytes on an idle connection: nothing can use them, and it cannot be reused
            self.abort()
            return
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._lose(httpx.RemoteProtocolError(f"malformed HTTP response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._disarm()
        self.pool.forget(self)
        if self.sink is None or self.parser is None:
            return
        if exc is None and self.headers_done and self._ends_at_close():
            self.on_message_complete()  # an HTTP/1.0-style body: the close is its end
            return
        self._lose(self._lost_reason(exc))

    # --- httptools callbacks --------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_bytes += len(name) + len(value)
        if self.header_bytes > MAX_HEADER_BYTES:
            if self.sink is not None:
                self._lose(httpx.RemoteProtocolError(f"response headers over {MAX_HEADER_BYTES:,} bytes"))
            return
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        old = self.headers.get(key)
        self.headers[key] = text if old is None else f"{old}, {text}"

    def on_headers_complete(self) -> None:
        self.headers_done = True
        sink, parser = self.sink, self.parser
        if sink is not None and parser is not None:
            sink.head(parser.get_status_code(), self.headers, self.now)

    def on_message_complete(self) -> None:
        sink, parser = self.sink, self.parser
        keep = parser is not None and parser.should_keep_alive() and not self.closed
        self.sink = self.parser = None
        self.on_body = _ignore  # an idle connection keeps nothing of its last request alive
        self._disarm()
        if keep:
            self.pool.release(self)
        else:
            self.abort()
        if sink is not None:
            sink.end(self.now)

    # --- internals ------------------------------------------------------------------------------

    def _lose(self, exc: httpx.TransportError) -> None:
        sink = self.sink
        self.abort()
        if sink is not None:
            sink.lost(exc)

    def _ends_at_close(self) -> bool:
        return (
            "content-length" not in self.headers
            and "chunked" not in self.headers.get("transfer-encoding", "").lower()
        )

    def _lost_reason(self, exc: Exception | None) -> httpx.TransportError:
        if not self.received:
            error: httpx.TransportError = httpx.RemoteProtocolError(
                "Server disconnected without sending a response."
            )
        elif not self.headers_done:
            error = httpx.RemoteProtocolError("server closed the connection inside the response headers")
        elif "chunked" in self.headers.get("transfer-encoding", "").lower():
            error = httpx.RemoteProtocolError("incomplete chunked read")
        else:
            expected = self.headers.get("content-length", "?")
            error = httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body: "
                f"received fewer bytes than expected ({expected})"
            )
        if exc is not None:
            error = httpx.ReadError(str(exc) or type(exc).__name__)
            error.__cause__ = exc
        return error

    def _arm(self, after_s: float) -> None:
        self._disarm()
        self.timer = asyncio.get_running_loop().call_later(after_s, self._check_silence)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _check_silence(self) -> None:
        """The read-silence limit, checked once per limit rather than re-armed on every read."""
        self.timer = None
        now = time.perf_counter_ns()
        if self.drain_until_ns:
            if now >= self.drain_until_ns:
                self._lose(httpx.ReadTimeout("the body did not end after the stream did"))
            else:
                self._arm((self.drain_until_ns - now) / 1e9)
            return
        limit_s = self.pool.read_timeout_s
        silent_s = (now - self.now) / 1e9
        if silent_s >= limit_s:
            self._lose(httpx.ReadTimeout(f"no data for {silent_s:.1f} s"))
        else:
            self._arm(limit_s - silent_s)


class ConnectionPool:
    """Keep-alive connections to one origin, without a limit on how many (one per request in flight)."""

    def __init__(
        self,
        base_url: str,
        ssl_context: ssl.SSLContext,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
        drain_s: float = 1.0,
    ) -> None:
        parts = urlsplit(base_url)
        self.https = parts.scheme.lower() == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.https else 80)
        default_port = self.port == (443 if self.https else 80)
        name = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = name if default_port else f"{name}:{self.port}"
        self.ssl_context = ssl_context if self.https else None
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.drain_s = drain_s
        self.idle: list[Connection] = []
        self.live: set[Connection] = set()

    def checkout(self) -> Connection | None:
        """The most recently used idle connection still open and fresh, or None."""
        loop_now = time.monotonic()
        idle = self.idle
        while idle:
            conn = idle.pop()
            if not conn.closed and loop_now - conn.idle_since < KEEPALIVE_S:
                return conn
            conn.abort()
        return None

    async def connect(self) -> Connection:
        """A new connection; raises `httpx.ConnectError` or `httpx.ConnectTimeout` (TLS and DNS errors in
        the cause chain, as the classifier expects)."""
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: Connection(self),
                    self.host,
                    self.port,
                    ssl=self.ssl_context,
                    server_hostname=self.host if self.https else None,
                ),
                self.connect_timeout_s,
            )
        except asyncio.TimeoutError as exc:
            raise httpx.ConnectTimeout("connect timeout") from exc
        except OSError as exc:  # ssl.SSLError and socket.gaierror among them
            error = httpx.ConnectError(str(exc) or type(exc).__name__)
            error.host = self.host  # type: ignore[attr-defined]  # named in "cannot resolve host"
            raise error from exc
        return conn

    async def warm(self, count: int) -> int:
        """Open connections until ``count`` are idle, all at once, so the first requests need not connect on
        their critical path (a loopback connect under load took up to 10 ms, measured). Returns how many it
        opened; a failure opens none and is left for the request that needs the connection to report."""
        fresh = [conn for conn in self.idle if not conn.closed]
        wanted = count - len(fresh)
        if wanted <= 0:
            return 0
        results = await asyncio.gather(*(self.connect() for _ in range(wanted)), return_exceptions=True)
        opened = [conn for conn in results if isinstance(conn, Connection)]
        for conn in opened:
            self.release(conn)
        return len(opened)

    def opened(self, conn: Connection) -> None:
        self.live.add(conn)

    def release(self, conn: Connection) -> None:
        conn.idle_since = time.monotonic()
        self.idle.append(conn)

    def forget(self, conn: Connection) -> None:
        self.live.discard(conn)

    async def aclose(self) -> None:
        for conn in list(self.live):
            with contextlib.suppress(Exception):
                conn.abort()
        self.idle.clear()
        await asyncio.sleep(0)  # let the transports run their connection_lost
