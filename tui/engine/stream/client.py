"""One streaming request in, one `RequestRecord` out.

Over the client `tui.engine.stream.transport.make_client` builds: the raw byte stream fed to our own SSE
decoder, every failure classified into one line, and the response always closed in ``finally``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import httpx
import orjson

from tui import __version__
from tui.engine.config import TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.redact import mask_secret
from tui.engine.stream.apis import api_headers
from tui.engine.stream.error_class import classify_exception
from tui.engine.stream.failures import (
    ERROR_BODY_LIMIT,
    WHOLE_ANSWER_LIMIT,
    EventApplier,
    Failure,
    RetryFresh,
    RetryWithoutFixedOsl,
    ended_early,
    event_applier,
    finish_whole_answer,
    handle_event,
    http_failure,
    is_event_stream,
    not_sse_failure,
    redirect_failure,
    stall_message,
)
from tui.engine.stream.failures import (
    MAX_SKIPPED_LINES as MAX_SKIPPED_LINES,  # re-exported: the cap is part of this module's contract
)
from tui.engine.stream.hold import wait_until_ns
from tui.engine.stream.openai import StreamAccumulator, build_body, endpoint_url, one_line
from tui.engine.stream.sse import SSEDecoder, SSEDecoderError
from tui.engine.stream.transport import SENDING, protocol_streams, stream_transport
from tui.engine.trace_context import traceparent
from tui.engine.workload import RequestKey, RequestSpec, Workload, build_workload

if TYPE_CHECKING:
    from tui.engine.traces.protocol import TraceRequest

REQUEST_ID_HEADER = "x-tokentop-request-id"
_DRAIN_S = 1.0


class RequestSession:
    """Everything a worker's requests share: the client, URL, headers, the workload that says what each
    request asks for, and what the server turned out to accept.

    ``workload`` is a `Workload`, or a `WorkloadConfig` to build one from (`build_workload`), so callers that
    only have the config (the engine worker, for now) need not change.
    """

    def __init__(
        self,
        client: httpx.AsyncClient | None,
        target: TargetConfig,
        workload: WorkloadConfig | Workload,
        model: str,
        *,
        worker: int = 0,
        workers: int = 1,
        notice: Callable[[str], None] | None = None,
        transport: str | None = None,
        trace_key: str = "",
    ) -> None:
        """``trace_key``: the run's (`EngineOptions.trace_key`): each request carries a ``traceparent``."""
        self.client = client
        self.trace_key = trace_key
        self.target = target
        self.workload: Workload = (
            build_workload(workload, workers=workers) if isinstance(workload, WorkloadConfig) else workload
        )
        self.model = model
        self.worker = worker
        self.workers = workers
        self.url = endpoint_url(target)
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            # A compressed event stream would be buffered by the compressor: timings would lie.
            "accept-encoding": "identity",
            "user-agent": f"tokentop/{__version__}",
            **api_headers(target.endpoint, target.api_key),
        }
        for name, value in target.headers:
            headers[name.lower()] = value
        self.headers = headers
        self.apply_event: EventApplier = event_applier(target.endpoint)
        """How this API's stream events are read."""
        self.whole_answer = target.endpoint == "embeddings"
        """The API answers in one JSON body (embeddings): read whole, no stream."""
        self.fixed_osl_fields = True
        """Cleared (for the rest of the run) when the server rejects ignore_eos/min_tokens."""
        self.notice = notice or (lambda _msg: None)
        self.stream_transport = stream_transport(target, transport)
        """Which path carries the streams, and why when it is not the one asked for."""
        self.streams = (
            protocol_streams(target, self.url, headers) if self.stream_transport.name == "protocol" else None
        )
        """The protocol path's pool, or None when httpx carries the streams."""
        if client is None and self.streams is None:
            raise ValueError(f"the {self.stream_transport.name} path needs an httpx client for its streams")

    async def aclose(self) -> None:
        """Close the protocol path's connections (the httpx client is its owner's to close)."""
        if self.streams is not None:
            await self.streams.aclose()

    async def warm(self, count: int) -> int:
        """Open ``count`` connections ahead of the requests that will use them (a trace replay's first sends
        would otherwise connect on their way out). Only the protocol path can open a connection without a
        request; over httpx this opens none. Returns how many it opened."""
        if self.streams is None:
            return 0
        return await self.streams.warm(count)

    def scrub(self, text: str) -> str:
        """Never let the API key into a message (call it before cutting one, too: `mask_secret`)."""
        return mask_secret(text, self.target.api_key)

    def body(self, spec: RequestSpec) -> bytes:
        """The JSON body for ``spec``, as the server now accepts it (built again for a retry without the
        fixed-OSL fields)."""
        return build_body(self.target, self.model, spec, fixed_osl_fields=self.fixed_osl_fields)


async def run_request(
    session: RequestSession,
    record: RequestRecord,
    acc: StreamAccumulator,
    *,
    user: int | None = None,
    trace: TraceRequest | None = None,
) -> RequestRecord:
    """Send one request, stream its answer into ``acc``, and fill ``record`` (returned) with the stamps.

    The session's workload says what the request asks for (once, whatever the retries) and sees the finished
    record, with the reply text if it wants it; ``user``: the closed-loop user sending it (its index in this
    worker), for a workload that keeps a conversation per user; ``trace``: a replay's entry for it.

    Never raises for a failed request: the failure is classified into ``record.error_class``. A whole-request
    deadline of ``timeout_s`` is enforced on top of the per-read silence limit. If the task is cancelled from
    outside (stop), the record is finished as ``cancelled`` and the cancellation propagates.
    """
    key = RequestKey(session.worker, record.seq, user, trace)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    deadline_hit = False

    def on_deadline() -> None:
        nonlocal deadline_hit
        deadline_hit = True
        if task is not None:
            task.cancel()

    timer = loop.call_later(session.target.timeout_s, on_deadline)
    fixed_retry_done = False
    spec: RequestSpec | None = None
    try:
        spec = session.workload.next_request(key)
        if session.workload.wants_replies:
            acc.reply = []
        while True:
            try:
                await _attempt(session, spec, record, acc)
                break
            except RetryFresh:
                if record.retries >= 1:
                    raise
                record.retries += 1
            except RetryWithoutFixedOsl:
                if fixed_retry_done:
                    raise
                fixed_retry_done = True
                record.retries += 1
    except RetryFresh as exc:
        _fail(record, "disconnect", str(exc.__cause__ or exc) or "connection closed")
    except RetryWithoutFixedOsl:
        _fail(record, "http_4xx", "server rejected the request body")
    except Failure as exc:
        _fail(record, exc.error_class, session.scrub(exc.message), exc.http_status)
        acc.retry_after_s = exc.retry_after_s
    except asyncio.CancelledError:
        if not deadline_hit:
            _fail(record, "cancelled", "cancelled")
            record.status = "cancelled"
            _finish_tokens(record, acc, spec, whole=session.whole_answer)
            _respond(session, key, spec, record, acc)
            raise
        uncancel = getattr(task, "uncancel", None)
        if uncancel is not None:
            uncancel()
        _fail_deadline(record, acc, session.target.timeout_s)
    except Exception as exc:  # a bug of ours: keep the run going, say what happened
        _fail(record, "client", session.scrub(one_line(f"{type(exc).__name__}: {exc}")))
    finally:
        timer.cancel()
    _finish_tokens(record, acc, spec, whole=session.whole_answer)
    _respond(session, key, spec, record, acc)
    return record


def _respond(
    session: RequestSession,
    key: RequestKey,
    spec: RequestSpec | None,
    record: RequestRecord,
    acc: StreamAccumulator,
) -> None:
    """Hand the finished request to the workload. A failing hook is a bug of the workload: the record says so
    (class ``client``), its stamps stay as measured, and the run goes on."""
    if spec is None:
        return
    reply = "".join(acc.reply) if acc.reply is not None else None
    try:
        session.workload.on_response(key, spec, reply, record)
    except Exception as exc:
        record.status = "error"
        record.error_class = "client"
        record.error = session.scrub(one_line(f"workload: {type(exc).__name__}: {exc}"))


def _fail(record: RequestRecord, error_class: str, message: str, http_status: int | None = None) -> None:
    record.end_ns = time.perf_counter_ns()
    record.status = "error"
    record.error_class = error_class
    record.error = one_line(message)
    if http_status is not None:
        record.http_status = http_status


def _fail_deadline(record: RequestRecord, acc: StreamAccumulator, timeout_s: float) -> None:
    """The whole-request deadline passed. Before any output that is a `timeout`; after output, a stream
    silent for at least half its time budget has `stall`ed (its own class: the server started, then
    stopped), one still sending is only slow (a `timeout` of the whole request)."""
    now = time.perf_counter_ns()
    chunks = len(acc.chunk_ns)
    if not chunks:
        _fail(record, "timeout", f"no output within the {timeout_s:g} s timeout")
        return
    silent_s = (now - max(acc.last_read_ns, acc.chunk_ns[-1])) / 1e9
    if silent_s >= timeout_s / 2:
        _fail(record, "stall", stall_message(chunks, silent_s))
    else:
        _fail(record, "timeout", f"request took longer than the {timeout_s:g} s timeout")


def _finish_tokens(
    record: RequestRecord, acc: StreamAccumulator, spec: RequestSpec | None, *, whole: bool = False
) -> None:
    """The record's tokens from what the stream said; ``whole``: an answer with no output text (embeddings),
    whose OSL is not 0 but undefined (None)."""
    record.chunk_ns = acc.chunk_ns
    if acc.chunk_ns:
        record.first_content_ns = acc.chunk_ns[0]
    record.reasoning_chunks = acc.reasoning_chunks
    record.first_answer_ns = acc.first_answer_ns
    record.reasoning_tokens = acc.usage_reasoning
    record.finish_reason = acc.finish_reason
    n_chunks = len(acc.chunk_ns)
    if acc.tokens_known and n_chunks and len(acc.chunk_tokens) == n_chunks:
        record.chunk_tokens = acc.chunk_tokens
    if acc.usage_prompt is not None:
        record.input_tokens, record.input_source = acc.usage_prompt, "usage"
    else:
        estimate = spec.expected_input_tokens if spec is not None else None
        record.input_tokens, record.input_source = estimate, "estimate"
    record.cached_tokens = acc.usage_cached
    record.skipped_lines = acc.skipped_lines
    if whole:
        record.output_tokens = None
    elif acc.usage_completion is not None:
        record.output_tokens, record.output_source = acc.usage_completion, "usage"
    elif record.chunk_tokens is not None:
        record.output_tokens, record.output_source = acc.tokens, "usage"
    else:
        record.output_tokens, record.output_source = n_chunks, "chunks"


async def _attempt(
    session: RequestSession, spec: RequestSpec, record: RequestRecord, acc: StreamAccumulator
) -> None:
    request_id = f"{record.worker}-{record.seq}"
    parent = traceparent(session.trace_key, record.worker, record.seq) if session.trace_key else None
    sent_fixed_osl = session.fixed_osl_fields
    body = session.body(spec)
    if session.streams is not None:
        # built ahead of its time (a trace replay): the connection is made ready first, then only the write
        # is held to the moment
        await session.streams.attempt(
            session, request_id, body, record, acc, sent_fixed_osl, due_ns=record.scheduled_ns,
            traceparent=parent,
        )  # fmt: skip
        return
    headers = dict(session.headers)
    headers[REQUEST_ID_HEADER] = request_id
    if parent is not None:
        headers["traceparent"] = parent
    client = session.client
    assert client is not None  # checked when the session was made: httpx carries this stream
    request = client.build_request("POST", session.url, content=body, headers=headers)
    # httpx takes its connection inside ``send``, after the hold: a connect it has to make is on the
    # request's way out (between send_start and sent on aiohttp); there is no public way to take one ahead
    if record.scheduled_ns is not None and record.scheduled_ns > time.perf_counter_ns():
        await wait_until_ns(record.scheduled_ns)  # built ahead of its time (a trace replay): sent on it
    record.send_start_ns = record.sent_ns = time.perf_counter_ns()
    token = SENDING.set(record)
    try:
        response = await client.send(request, stream=True)
    except httpx.HTTPError as exc:
        kind, message, retryable = classify_exception(exc, started=False)
        if retryable:
            raise RetryFresh(message) from exc
        raise Failure(kind, message) from exc
    finally:
        SENDING.reset(token)
    try:
        record.first_byte_ns = time.perf_counter_ns()
        record.http_status = response.status_code
        if response.status_code >= 400:
            body = await _read_some(response)
            raise http_failure(session, response.status_code, response.headers, body, sent_fixed_osl)
        if 300 <= response.status_code < 400:
            raise redirect_failure(response.status_code, response.headers.get("location"))
        if session.whole_answer:
            await _read_whole(response, acc, record)
            return
        content_type = response.headers.get("content-type", "")
        if not is_event_stream(content_type):
            raise not_sse_failure(session, content_type, await _read_some(response))
        await _read_stream(response, acc, record, session.apply_event)
    finally:
        await response.aclose()
        _unlink(response)


_CLOSED_STREAM = httpx.ByteStream(b"")


def _unlink(response: httpx.Response) -> None:
    """Break the reference cycle between an httpx streamed response and its bound stream.

    Each streamed `httpx.Response` and its `BoundAsyncStream` refer to each other, so the pair and the
    aiohttp objects behind it (~23 containers per request) outlive the request as cyclic garbage until the
    collector's next full pass: in the worker at 77 req/s, a 35 ms pause every ~10 s, during which every
    chunk that arrives is stamped late. Without the back-reference, reference counting frees it at once."""
    response.stream = _CLOSED_STREAM


async def _read_some(response: httpx.Response) -> bytes:
    body = bytearray()
    try:
        async for part in response.aiter_raw():
            body += part
            if len(body) >= ERROR_BODY_LIMIT:
                break
    except httpx.HTTPError:
        pass
    return bytes(body)


async def _read_whole(response: httpx.Response, acc: StreamAccumulator, record: RequestRecord) -> None:
    """An answer that is one JSON body (embeddings): its end is the request's end; no chunks, no TTFT."""
    body = bytearray()
    try:
        async for part in response.aiter_bytes():
            acc.last_read_ns = time.perf_counter_ns()
            body += part
            if len(body) > WHOLE_ANSWER_LIMIT:
                break
    except httpx.HTTPError as exc:
        kind, message, _ = classify_exception(exc, started=True, chunks=0)
        if kind == "stall":
            kind, message = "timeout", "no whole answer within the timeout"
        raise Failure(kind, message) from exc
    record.end_ns = time.perf_counter_ns()
    finish_whole_answer(acc, bytes(body))


async def _read_stream(
    response: httpx.Response, acc: StreamAccumulator, record: RequestRecord, apply: EventApplier
) -> None:
    decoder = SSEDecoder()
    feed = decoder.feed
    loads = orjson.loads
    perf_ns = time.perf_counter_ns
    encoding = response.headers.get("content-encoding", "identity").lower()
    stream = response.aiter_raw() if encoding in ("identity", "") else response.aiter_bytes()
    now = acc.last_read_ns = record.first_byte_ns or perf_ns()
    try:
        async for data in stream:
            now = acc.last_read_ns = perf_ns()
            for event in feed(data):
                if handle_event(event.event, event.data, acc, now, loads, apply):
                    record.end_ns = now
                    await _discard_rest(stream)
                    return
        now = perf_ns()
        for event in decoder.flush():
            if handle_event(event.event, event.data, acc, now, loads, apply):
                record.end_ns = now
                return
    except httpx.HTTPError as exc:
        kind, message, _ = classify_exception(exc, started=True, chunks=len(acc.chunk_ns))
        if kind == "stall" and acc.chunk_ns:
            message = stall_message(len(acc.chunk_ns), (perf_ns() - acc.last_read_ns) / 1e9)
        elif kind == "stall":  # headers, perhaps a role delta, but no output: not a stall of output
            kind, message = "timeout", "no output within the timeout"
        raise Failure(kind, message) from exc
    except SSEDecoderError as exc:
        # A line or event past the decoder's cap (a server bug or a hostile body): fail this request alone,
        # keeping the chunks that arrived whole before it; the decoder never held more than the cap.
        for event in exc.events:
            if handle_event(event.event, event.data, acc, now, loads, apply):
                break
        raise Failure("oversized", f"oversized stream: {exc}") from None
    if acc.finish_reason is None:
        # the body ended cleanly but the stream did not: say how far it got, as a broken connection does
        raise ended_early(len(acc.chunk_ns), apply)
    record.end_ns = now  # lenient: a finish_reason was seen, only [DONE] is missing


async def _discard_rest(stream: AsyncIterator[bytes]) -> None:
    """Read to the end of the body after ``[DONE]`` (normally just the chunked-encoding terminator), so the
    connection goes back to the pool instead of being closed; give up after a moment on a server that keeps
    the stream open."""

    async def rest() -> None:
        async for _ in stream:
            pass

    with contextlib.suppress(asyncio.TimeoutError, httpx.HTTPError):
        await asyncio.wait_for(rest(), _DRAIN_S)
