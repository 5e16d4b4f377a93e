"""One request against a scripted server on 127.0.0.1: the edge cases of streams in the wild."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Awaitable, Callable

import pytest

from tests.support.engine_helpers import run_requests
from tests.support.scripted_server import (
    Request,
    Responder,
    ScriptedServer,
    chat_chunk,
    normal_stream,
    sse,
    usage_chunk,
)
from tui.engine.config import Endpoint, TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord, RequestsLog
from tui.engine.stream.client import MAX_SKIPPED_LINES, RequestSession, run_request
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import TransportName, make_client

pytestmark = pytest.mark.timeout(20)
TRANSPORTS: list[TransportName] = ["protocol", "aiohttp", "httpx"]
SECRET = "sk-test-SECRET-0123456789"


async def _run(
    handler: Callable[[Request, Responder], Awaitable[None]],
    *,
    transport: TransportName | None = None,
    timeout_s: float = 5.0,
    n: int = 1,
    endpoint: Endpoint = "chat",
    notices: list[str] | None = None,
) -> tuple[list[RequestRecord], list[StreamAccumulator], ScriptedServer]:
    server = await ScriptedServer(handler).start()
    target = TargetConfig(
        base_url=server.url,
        model="m",
        endpoint=endpoint,
        api_key=SECRET,
        headers=(("X-Extra", "1"),),
        timeout_s=timeout_s,
    )
    client = make_client(target, transport)
    session = RequestSession(
        client,
        target,
        WorkloadConfig(isl=16, osl=8),
        "m",
        notice=(notices.append if notices is not None else None),
        transport=transport,
    )
    records, accs = await run_requests(session, client, server, n)
    return records, accs, server


def _text(acc: StreamAccumulator) -> str:
    return "".join(acc.pending_text)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_normal_stream_records_everything(transport: TransportName) -> None:
    words = ["Hello", " wor", "ld", "!"]

    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        for ev in normal_stream(words, prompt_tokens=17):
            await resp.send(ev)
        await resp.end()

    (rec,), (acc,), server = await _run(handler, transport=transport)
    assert rec.status == "ok", rec.error
    assert rec.http_status == 200
    assert len(rec.chunk_ns) == 4
    assert rec.first_content_ns == rec.chunk_ns[0]
    assert rec.first_byte_ns is not None and rec.first_content_ns is not None
    assert rec.sent_ns < rec.first_byte_ns <= rec.first_content_ns <= rec.chunk_ns[-1] <= rec.end_ns
    assert (rec.input_tokens, rec.input_source) == (17, "usage")
    assert (rec.output_tokens, rec.output_source) == (4, "usage")
    assert rec.finish_reason == "stop"
    assert _text(acc) == "Hello world!"
    req = server.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.headers["x-tokentop-request-id"] == "0-0"
    assert req.headers["authorization"] == f"Bearer {SECRET}"
    assert req.headers["x-extra"] == "1"
    body = json.loads(req.body)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 8 and body["min_tokens"] == 8 and body["ignore_eos"] is True
    assert body["messages"][0]["role"] == "user"
    assert 12 <= len(body["messages"][0]["content"].split()) <= 20


async def test_hand_split_bytes_crlf_multibyte_and_u2028() -> None:
    # CRLF line ends, a multi-byte character and U+2028 (raw, inside a JSON string) cut across reads.
    payload = ""
    for w in ["żółw", "\u2028line", " 🐢"]:
        payload += "data: " + json.dumps(chat_chunk(w), ensure_ascii=False) + "\r\n\r\n"
    payload += ": keep-alive\r\n\r\n"
    payload += "data: " + json.dumps(usage_chunk(3, 3)) + "\r\n\r\ndata: [DONE]\r\n\r\n"
    raw = payload.encode()
    cuts = [1, 9, raw.index("ż".encode()) + 1, raw.index("🐢".encode()) + 2, raw.index(b"\r\n") + 1]
    cuts = sorted(set(c for c in cuts if 0 < c < len(raw)))

    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        prev = 0
        for c in [*cuts, len(raw)]:
            await resp.send(raw[prev:c])
            prev = c
        await resp.end()

    (rec,), (acc,), _ = await _run(handler)
    assert rec.status == "ok", rec.error
    assert _text(acc) == "żółw\u2028line 🐢"
    assert len(rec.chunk_ns) == 3


async def test_reasoning_then_content_counts_both() -> None:
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        for ev in [
            sse(chat_chunk(role=True)),
            sse(chat_chunk(reasoning="think")),
            sse({"choices": [{"index": 0, "delta": {"reasoning": " more"}}]}),
            sse(chat_chunk("answer")),
            sse(chat_chunk(finish="stop")),
            sse("[DONE]"),
        ]:
            await resp.send(ev)
        await resp.end()

    (rec,), (acc,), _ = await _run(handler)
    assert rec.status == "ok"
    assert len(rec.chunk_ns) == 3 and rec.reasoning_chunks == 2
    assert (rec.output_tokens, rec.output_source) == (3, "chunks")
    assert rec.input_source == "estimate"
    # the lanes get the two apart (a face draws the reasoning apart from the answer)
    assert _text(acc) == "answer" and "".join(acc.pending_reasoning) == "think more"


async def test_completions_endpoint() -> None:
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        for t in ["a", "b"]:
            await resp.send(sse({"choices": [{"index": 0, "text": t, "finish_reason": None}]}))
        await resp.send(sse({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}))
        await resp.send(sse("[DONE]"))
        await resp.end()

    (rec,), _, server = await _run(handler, endpoint="completions")
    assert rec.status == "ok" and len(rec.chunk_ns) == 2
    assert server.requests[0].path == "/v1/completions"
    assert "prompt" in json.loads(server.requests[0].body)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_error_object_inside_stream(transport: TransportName) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        await resp.send(sse(chat_chunk("a")))
        await resp.send(sse({"error": {"message": "engine died\nbadly", "code": 500}}))
        await resp.end()

    (rec,), _, _ = await _run(handler, transport=transport)
    assert (rec.status, rec.error_class) == ("error", "stream_error")
    assert rec.error is not None and "engine died badly" in rec.error and "\n" not in rec.error
    assert len(rec.chunk_ns) == 1


async def test_a_malformed_line_is_skipped_and_counted_and_the_stream_goes_on() -> None:
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        await resp.send(b'data: {"choices": [\n\n')
        await resp.send(b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n')
        await resp.send(b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
        await resp.end()

    (rec,), _, _ = await _run(handler)
    assert (rec.status, rec.skipped_lines, len(rec.chunk_ns)) == ("ok", 1, 1)
    log = io.BytesIO()
    RequestsLog(log).write(rec)  # the requests log says so too, line by line
    assert json.loads(log.getvalue())["skipped_lines"] == 1


async def test_a_stream_of_malformed_lines_fails_as_malformed_past_the_cap() -> None:
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        for _ in range(MAX_SKIPPED_LINES + 1):
            await resp.send(b"data: <html>\n\n")
        await resp.end()

    (rec,), _, _ = await _run(handler)
    assert (rec.error_class, rec.skipped_lines) == ("malformed", MAX_SKIPPED_LINES + 1)
    assert rec.error is not None and f"more than {MAX_SKIPPED_LINES} malformed lines" in rec.error


async def test_an_oversized_line_fails_the_request_as_oversized() -> None:
    """2 MiB without a newline after one good chunk: past the decoder's 1 MiB line cap, so the request fails
    as `oversized` at once, keeping the chunk it had (not hanging, not a full core for minutes)."""

    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        await resp.send(sse(chat_chunk("a")))
        for _ in range(32):
            await resp.send(b"data: " + b"x" * 65536)
        await resp.end()

    (rec,), _, _ = await _run(handler)
    assert rec.error_class == "oversized", rec.error
    assert rec.error is not None and "1048576" in rec.error.replace(",", "")
    assert len(rec.chunk_ns) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_disconnect_mid_stream(transport: TransportName) -> None:
    """Named in tokentop's words, with how far the stream got, not aiohttp's "TransferEncodingError: 400,
    message='Not enough data to satisfy transfer length header.'"."""

    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        for word in ("a", "b", "c"):
            await resp.send(sse(chat_chunk(word)))
        resp.abort()

    (rec,), _, _ = await _run(handler, transport=transport)
    assert rec.error_class == "disconnect", rec.error
    assert rec.error == "server closed the stream after 3 chunks (incomplete chunked body)"
    assert len(rec.chunk_ns) == 3


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_body_short_of_its_content_length_is_named(transport: TransportName) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head(headers={"content-length": "1000"}, chunked=False)
        await resp.send(sse(chat_chunk("a")))
        resp.abort()

    (rec,), _, _ = await _run(handler, transport=transport)
    assert rec.error_class == "disconnect", rec.error
    assert rec.error == "server closed the stream after 1 chunk (body shorter than its content-length)"


async def test_end_without_done_is_a_disconnect() -> None:
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        await resp.send(sse(chat_chunk("a")))
        await resp.end()

    (rec,), _, _ = await _run(handler)
    assert rec.error_class == "disconnect"
    assert rec.error == "stream ended after 1 chunk, before [DONE]" and len(rec.chunk_ns) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_stall_after_output_is_its_own_class_with_chunks_and_silence(
    transport: TransportName,
) -> None:
    """Three chunks, then silence past the timeout: `stall`, saying how many chunks came and for how long
    the stream was silent (not "no output within the timeout", which is wrong for a stream that had output),
    and bounded by the timeout, not a hang."""
    release = asyncio.Event()

    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        for word in ("a", "b", "c"):
            await resp.send(sse(chat_chunk(word)))
        await asyncio.wait_for(release.wait(), 10)

    t0 = time.monotonic()
    (rec,), _, _ = await _run(handler, transport=transport, timeout_s=0.4)
    elapsed = time.monotonic() - t0
    release.set()
    assert rec.error_class == "stall", rec.error
    assert rec.error is not None and rec.error.startswith("stream stalled after 3 chunks: no data for 0.")
    assert len(rec.chunk_ns) == 3
    assert 0.35 < elapsed < 3.0


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_silence_before_any_output_is_a_timeout(transport: TransportName) -> None:
    release = asyncio.Event()

    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        await resp.send(sse(chat_chunk(role=True, content="")))  # a role delta: bytes, but no output
        await asyncio.wait_for(release.wait(), 10)

    (rec,), _, _ = await _run(handler, transport=transport, timeout_s=0.4)
    release.set()
    assert (rec.error_class, rec.error) == ("timeout", "no output within the 0.4 s timeout")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_json_completion_instead_of_a_stream_is_named(transport: TransportName) -> None:
    """200 with a whole JSON completion (a server or proxy that ignored ``stream: true``): class `not_sse`,
    the content type and the start of the body in the message, the key masked (it is echoed first here,
    so an unmasked message would start with it)."""
    completion = {
        "echo": SECRET,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    }

    async def handler(req: Request, resp: Responder) -> None:
        await resp.json(200, json.dumps(completion).encode())

    (rec,), _, _ = await _run(handler, transport=transport)
    assert (rec.status, rec.error_class, rec.http_status) == ("error", "not_sse", 200)
    assert rec.error is not None
    assert rec.error.startswith("expected an event stream, got a non-streamed completion (application/json")
    assert SECRET not in rec.error and SECRET[:8] not in rec.error
    assert '"echo": "' in rec.error and len(rec.error.partition("): ")[2]) <= 80


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_any_other_body_type_where_a_stream_was_asked_is_not_sse(transport: TransportName) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        body = b"<html><body>Please sign in</body></html>"
        await resp.json(200, body, {"content-type": "text/html; charset=utf-8"})

    (rec,), _, _ = await _run(handler, transport=transport)
    assert rec.error_class == "not_sse"
    assert rec.error == "expected an event stream, got text/html: <html><body>Please sign in</body></html>"


async def test_whole_request_deadline() -> None:
    # Chunks keep coming (no silence), but the request as a whole runs past the timeout.
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        for _ in range(200):
            await resp.send(sse(chat_chunk("a")))
            await asyncio.sleep(0.02)

    (rec,), _, _ = await _run(handler, timeout_s=0.5)
    assert rec.error_class == "timeout"
    assert 0.45e9 < rec.end_ns - rec.sent_ns < 2e9


@pytest.mark.parametrize(("status", "klass"), [(500, "http_5xx"), (429, "http_429"), (404, "http_4xx")])
async def test_http_errors(status: int, klass: str) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        extra = {"retry-after": "1"} if status == 429 else None
        await resp.json(status, b'{"error": {"message": "nope"}}', extra)

    (rec,), _, _ = await _run(handler)
    assert (rec.error_class, rec.http_status) == (klass, status)
    assert rec.error is not None and rec.error.startswith(f"HTTP {status}: nope")


async def test_rejected_fixed_osl_fields_are_dropped_once() -> None:
    async def handler(req: Request, resp: Responder) -> None:
        body = json.loads(req.body)
        if "ignore_eos" in body:
            await resp.json(400, b'{"object":"error","message":"extra fields not permitted: ignore_eos"}')
            return
        await resp.head()
        for ev in normal_stream(["x"]):
            await resp.send(ev)
        await resp.end()

    notices: list[str] = []
    records, _, server = await _run(handler, n=3, notices=notices)
    assert [r.status for r in records] == ["ok"] * 3
    assert records[0].retries == 1 and records[1].retries == 0
    assert len(server.requests) == 4
    assert len(notices) == 1 and "ignore_eos" in notices[0]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_stale_keepalive_connection_is_retried_once(transport: TransportName) -> None:
    per_conn: dict[int, int] = {}

    async def handler(req: Request, resp: Responder) -> None:
        per_conn[req.conn_index] = per_conn.get(req.conn_index, 0) + 1
        if per_conn[req.conn_index] > 1:
            resp.abort()  # the server had closed this idle connection: no response byte at all
            return
        await resp.head()
        for ev in normal_stream(["x"]):
            await resp.send(ev)
        await resp.end()

    records, _, server = await _run(handler, transport=transport, n=3)
    assert [r.status for r in records] == ["ok"] * 3, [r.error for r in records]
    assert sum(r.retries for r in records) >= 1
    assert len({r.conn_index for r in server.requests}) >= 2


async def test_connect_refused() -> None:
    target = TargetConfig(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=5)
    client = make_client(target)
    try:
        session = RequestSession(client, target, WorkloadConfig(), "m")
        rec = await run_request(session, RequestRecord(1, 0, 0, 1, 0), StreamAccumulator())
        await session.aclose()
    finally:
        await client.aclose()
    assert rec.error_class == "connect"
    assert rec.error is not None and "refused" in rec.error


async def test_cancel_finishes_record_as_cancelled() -> None:
    started = asyncio.Event()

    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        await resp.send(sse(chat_chunk("a")))
        started.set()
        await asyncio.sleep(10)

    server = await ScriptedServer(handler).start()
    target = TargetConfig(base_url=server.url, model="m", timeout_s=30)
    client = make_client(target)
    rec = RequestRecord(1, 0, 0, 1, 0)
    try:
        session = RequestSession(client, target, WorkloadConfig(), "m")
        task = asyncio.ensure_future(run_request(session, rec, StreamAccumulator()))
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await session.aclose()
    finally:
        await client.aclose()
        await server.close()
    assert rec.status == "cancelled" and rec.error_class == "cancelled"
    assert rec.end_ns > 0


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_finished_requests_leave_no_cyclic_garbage(transport: TransportName) -> None:
    """A streamed httpx response and its bound stream refer to each other; left alone, every request became
    ~23 containers of cyclic garbage, and the worker paused ~35 ms every ~10 s to collect them (late
    stamps for every chunk meanwhile). The engine unlinks them, so reference counting frees each request."""
    import gc

    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        for event in normal_stream(["a", "b", "c"]):
            await resp.send(event)
        await resp.end()

    await _run(handler, transport=transport, n=3)  # warm up: connection pool, first-use caches
    gc.collect()
    gc.disable()
    try:
        records, _, _ = await _run(handler, transport=transport, n=20)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        per_request = {
            "httpx.Response",
            "httpx._client.BoundAsyncStream",
            "aiohttp.client_reqrep.ClientResponse",
        }
        left = [o for o in gc.garbage if f"{type(o).__module__}.{type(o).__qualname__}" in per_request]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert all(r.status == "ok" for r in records)
    assert left == []  # (the client's and the test server's own teardown may leave cycles: not counted)
