"""One streaming attempt over `tui.engine.stream.h1`: the response decoded where it is read.

The SSE decoder, orjson and the accumulator run inside ``data_received`` with the read's stamp; the
request's task only waits for the outcome. The record comes out as the httpx path makes it: the same stamps
(sent just before the socket write, first byte at the end of the headers, each chunk at its read), the same
failures (`tui.engine.stream.failures`), the same retry of a stale keep-alive connection.
"""

from __future__ import annotations

import asyncio
import time
import zlib

import httpx
import orjson

from tui.engine.records import RequestRecord
from tui.engine.stream.chunk_shape import ChunkShape, learn_shape, text_holder
from tui.engine.stream.error_class import classify_exception
from tui.engine.stream.failures import (
    ERROR_BODY_LIMIT,
    WHOLE_ANSWER_LIMIT,
    Failure,
    RetryFresh,
    Session,
    ended_early,
    finish_whole_answer,
    handle_event,
    http_failure,
    is_event_stream,
    not_sse_failure,
    redirect_failure,
    stall_message,
)
from tui.engine.stream.h1 import Connection, ConnectionPool
from tui.engine.stream.hold import wait_until_ns
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.sse import SSEDecoder, SSEDecoderError

_HEAD, _STREAM, _DRAINING, _ERROR_BODY, _OVER, _WHOLE = range(6)
_LEARN_TRIES = 3
"""Answer chunks a stream's shape is looked for in before its reads all take the full path."""


class _Exchange:
    """The `tui.engine.stream.h1.ResponseSink` of one attempt: fills the record and the accumulator, and
    resolves ``outcome`` (None, or the exception the attempt ends in)."""

    __slots__ = (
        "acc",
        "conn",
        "content_type",
        "decoder",
        "error_body",
        "headers",
        "inflate",
        "learn_tries",
        "outcome",
        "ready_shape",
        "record",
        "sent_fixed_osl",
        "session",
        "shape",
        "state",
        "status",
    )

    def __init__(
        self,
        session: Session,
        record: RequestRecord,
        acc: StreamAccumulator,
        sent_fixed_osl: bool,
        conn: Connection,
    ) -> None:
        self.session, self.record, self.acc, self.sent_fixed_osl = session, record, acc, sent_fixed_osl
        self.conn = conn
        self.outcome: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.decoder = SSEDecoder()
        self.state = _HEAD
        self.status = 0
        self.headers: dict[str, str] = {}
        self.content_type = ""
        self.error_body = bytearray()
        self.inflate: zlib._Decompress | None = None
        self.shape: ChunkShape | None = None
        """Where this stream's answer text sits in its reads, once a read has shown it (`chunk_shape`)."""
        self.ready_shape: ChunkShape | None = None
        """The shape while the decoder is between events (a read of that shape then means only itself),
        else None."""
        self.learn_tries = _LEARN_TRIES

    def head(self, status: int, headers: dict[str, str], now: int) -> None:
        record = self.record
        record.first_byte_ns = now
        record.http_status = self.status = status
        self.headers = headers
        self.content_type = headers.get("content-type", "")
        if status < 300 and self.session.whole_answer:
            self.state = _WHOLE  # one JSON body (embeddings), read to its end
            self.acc.last_read_ns = now
            return
        if status >= 300 or not is_event_stream(self.content_type):
            self.state = _ERROR_BODY
            return
        self.state = _STREAM
        self.acc.last_read_ns = now
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding in ("gzip", "x-gzip"):
            self.inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif encoding == "deflate":
            self.inflate = zlib.decompressobj()

    def body(self, data: bytes) -> None:
        if self.state == _STREAM:
            acc = self.acc
            acc.last_read_ns = now = self.conn.now
            shape = self.ready_shape
            if (
                shape is not None
                and data.startswith(shape.prefix)
                and data.endswith(shape.suffix)
                and len(data) <= shape.max_bytes
            ):
                # The string token between them, quotes included (a shorter read gives no token).
                try:
                    text = orjson.loads(
                        data[shape.cut : len(data) - shape.back]
                        if shape.counter is None
                        else shape.token(data)
                    )
                except orjson.JSONDecodeError:
                    pass
                else:
                    if text:  # what `apply_chunk` does for this chunk; empty text is no chunk
                        acc.chunk_ns.append(now)
                        acc.pending_text.append(text)
                        if acc.reply is not None:
                            acc.reply.append(text)
                        acc.tokens += 1
                    return
            self._feed(data, now)
        elif self.state == _ERROR_BODY:
            self.error_body += data
            if len(self.error_body) >= ERROR_BODY_LIMIT:
                self._error_response(complete=False)
        elif self.state == _WHOLE:
            self.acc.last_read_ns = self.conn.now
            self.error_body += data
            if len(self.error_body) > WHOLE_ANSWER_LIMIT:
                self._fail_in_body(Failure("oversized", f"answer over {WHOLE_ANSWER_LIMIT:,} bytes"), 0)

    def end(self, now: int) -> None:
        if self.state == _DRAINING:
            self._settle(None)
        elif self.state == _STREAM:
            self._end_of_stream()
        elif self.state == _ERROR_BODY:
            self._error_response(complete=True)
        elif self.state == _WHOLE:
            self.record.end_ns = now
            try:
                finish_whole_answer(self.acc, bytes(self.error_body))
            except Failure as exc:
                self._settle(exc)
                return
            self._settle(None)
        elif self.state == _HEAD:  # a response without headers complete cannot end; be safe
            self._settle(Failure("disconnect", "connection closed: no response"))

    def lost(self, exc: httpx.TransportError) -> None:
        if self.state == _DRAINING:  # the answer was whole; only the connection is lost
            self._settle(None)
        elif self.state == _HEAD:
            kind, message, retryable = classify_exception(exc, started=False)
            self._settle(RetryFresh(message) if retryable else Failure(kind, message))
        elif self.state == _WHOLE:
            kind, message, _ = classify_exception(exc, started=True, chunks=0)
            if kind == "stall":
                kind, message = "timeout", "no whole answer within the timeout"
            self._settle(Failure(kind, message))
        elif self.state == _STREAM:
            acc = self.acc
            kind, message, _ = classify_exception(exc, started=True, chunks=len(acc.chunk_ns))
            if kind == "stall" and acc.chunk_ns:
                message = stall_message(len(acc.chunk_ns), (time.perf_counter_ns() - acc.last_read_ns) / 1e9)
            elif kind == "stall":  # headers, perhaps a role delta, but no output: not a stall of output
                kind, message = "timeout", "no output within the timeout"
            self._settle(Failure(kind, message))
        elif self.state == _ERROR_BODY:
            self._error_response(complete=True)  # what arrived of the body is what there is to quote

    # --- internals ------------------------------------------------------------------------------

    def _feed(self, data: bytes, now: int) -> None:
        """The full path of a stream read: inflate, SSE-decode, parse and apply each event; and learn the
        stream's chunk shape from one of its first answer chunks."""
        acc, decoder = self.acc, self.decoder
        learn = self.shape is None and self.learn_tries > 0 and self.inflate is None and decoder.at_boundary
        texts = len(acc.pending_text)
        chunks = len(acc.chunk_ns)
        try:
            if self.inflate is not None:
                data = self.inflate.decompress(data)
            loads, apply = orjson.loads, self.session.apply_event
            for event in decoder.feed(data):
                if handle_event(event.event, event.data, acc, now, loads, apply):
                    # complete; the connection is reusable once the rest of the body (normally the
                    # chunked terminator, in the same read) is in, which the attempt waits for
                    self.record.end_ns = now
                    self.state = _DRAINING
                    self.conn.drain()
                    return
        except (Failure, SSEDecoderError, zlib.error) as exc:
            self._fail_in_body(exc, now)
            return
        if learn and len(acc.chunk_ns) == chunks + 1 and len(acc.pending_text) == texts + 1:
            self.learn_tries -= 1
            holder = text_holder(self.session.apply_event)
            self.shape = learn_shape(data, acc.pending_text[-1], decoder.max_line_bytes, holder)
        self.ready_shape = self.shape if decoder.at_boundary else None

    def _end_of_stream(self) -> None:
        acc, record = self.acc, self.record
        now = time.perf_counter_ns()
        try:
            tail = self.inflate.flush() if self.inflate is not None else b""
            events = self.decoder.feed(tail) + self.decoder.flush() if tail else self.decoder.flush()
            for event in events:
                if handle_event(event.event, event.data, acc, now, orjson.loads, self.session.apply_event):
                    record.end_ns = now
                    self._settle(None)
                    return
        except (Failure, SSEDecoderError, zlib.error) as exc:
            self._fail_in_body(exc, now)
            return
        if acc.finish_reason is None:
            # the body ended cleanly but the stream did not: say how far it got, as a broken connection does
            self._settle(ended_early(len(acc.chunk_ns), self.session.apply_event))
            return
        record.end_ns = now  # lenient: a finish_reason was seen, only [DONE] is missing
        self._settle(None)

    def _fail_in_body(self, exc: Exception, now: int) -> None:
        if isinstance(exc, SSEDecoderError):
            # A line or event past the decoder's cap: fail this request alone, keeping the chunks that
            # arrived whole before it; the decoder never held more than the cap.
            try:
                apply = self.session.apply_event
                for event in exc.events:
                    if handle_event(event.event, event.data, self.acc, now, orjson.loads, apply):
                        break
            except Failure:
                pass
            exc = Failure("oversized", f"oversized stream: {exc}")
        elif isinstance(exc, zlib.error):
            exc = Failure("client", f"DecodingError: {exc}")
        self._settle(exc)
        self.conn.abort()

    def _error_response(self, *, complete: bool) -> None:
        """Name an error status or a non-stream body from its first bytes; ``complete``: the connection is
        already done with (back in the pool or closed), else it is dropped with the rest of the body."""
        body = bytes(self.error_body)
        failure: Exception
        if 300 <= self.status < 400:
            failure = redirect_failure(self.status, self.headers.get("location"))
        elif self.status >= 400:
            failure = http_failure(self.session, self.status, self.headers, body, self.sent_fixed_osl)
        else:
            failure = not_sse_failure(self.session, self.content_type, body)
        self._settle(failure)
        if not complete:
            self.conn.abort()

    def _settle(self, exc: BaseException | None) -> None:
        self.state = _OVER
        if self.outcome.done():
            return
        if exc is None:
            self.outcome.set_result(None)
        else:
            self.outcome.set_exception(exc)


class ProtocolStreams:
    """A worker's streaming requests over its own keep-alive pool (`tui.engine.stream.h1`)."""

    def __init__(self, pool: ConnectionPool, url: str, headers: dict[str, str]) -> None:
        self.pool = pool
        path = httpx.URL(url).raw_path.decode("ascii")
        lines = [f"POST {path} HTTP/1.1", f"host: {pool.host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        """The request line and every header but the per-request ones, encoded once."""

    async def attempt(
        self,
        session: Session,
        request_id: str,
        body: bytes,
        record: RequestRecord,
        acc: StreamAccumulator,
        sent_fixed_osl: bool,
        *,
        due_ns: int | None = None,
        traceparent: str | None = None,
    ) -> None:
        """Send one request and wait for its outcome (raises what `tui.engine.stream.failures` names).
        ``traceparent``: the request's W3C trace context, sent as that header.

        ``due_ns``: a moment to send it at (a trace replay's request, built ahead of its time). Its bytes
        and its connection (an idle one, or a connect) are made ready first and only the write is held to
        the moment, so a connect costs the schedule nothing when it fits in the lead."""
        request = b"".join(
            (
                self.head,
                b"x-tokentop-request-id: ",
                request_id.encode("ascii"),
                b"" if traceparent is None else b"\r\ntraceparent: " + traceparent.encode("ascii"),
                b"\r\ncontent-length: ",
                str(len(body)).encode("ascii"),
                b"\r\n\r\n",
                body,
            )
        )
        record.send_start_ns = record.sent_ns = time.perf_counter_ns()
        conn = await self._connection(fresh=record.retries > 0)
        if due_ns is not None and due_ns > time.perf_counter_ns():
            try:
                await wait_until_ns(due_ns)
            except BaseException:
                self.pool.release(conn)  # never written to: another request can use it
                raise
            record.send_start_ns = time.perf_counter_ns()  # the hold is not the client's overhead
            if conn.closed:  # the server let it go while it was held: a fresh one, late by its connect
                conn = await self._connection()
        exchange = _Exchange(session, record, acc, sent_fixed_osl, conn)
        record.sent_ns = conn.send(exchange, request)
        try:
            await exchange.outcome
        finally:
            if not exchange.outcome.done():  # cancelled (stop, or the whole-request deadline)
                exchange.state = _OVER
                conn.abort()

    async def _connection(self, *, fresh: bool = False) -> Connection:
        """An idle connection, else a new one (a failure to connect raised as `failures` names it).
        ``fresh``: always a new one (a retry after a stale keep-alive connection: the other idle ones may
        have been let go by the server the same way, its close not read yet)."""
        conn = None if fresh else self.pool.checkout()
        if conn is not None:
            return conn
        try:
            return await self.pool.connect()
        except httpx.HTTPError as exc:
            kind, message, retryable = classify_exception(exc, started=False)
            if retryable:
                raise RetryFresh(message) from exc
            raise Failure(kind, message) from exc

    async def warm(self, count: int) -> int:
        """Have ``count`` idle connections open (`ConnectionPool.warm`)."""
        return await self.pool.warm(count)

    async def aclose(self) -> None:
        await self.pool.aclose()
