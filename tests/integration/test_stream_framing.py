"""How a response is framed on the wire, on every stream transport: gzip, HTTP/1.0 close-delimited bodies,
a response written a byte at a time (headers included), Content-Length bodies, keep-alive reuse, redirects,
and the stamps' order. Each against a real server on 127.0.0.1 writing exact bytes."""

from __future__ import annotations

import asyncio
import contextlib
import time
import zlib

import pytest

from tests.support.engine_helpers import run_requests
from tests.support.scripted_server import Request, Responder, ScriptedServer, normal_stream
from tui.engine.config import TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import TRANSPORTS, TransportName, make_client, stream_transport

pytestmark = pytest.mark.timeout(20)
WORDS = ["one", " two", " three"]


async def _records(
    server: ScriptedServer, transport: TransportName, n: int = 1
) -> tuple[list[RequestRecord], list[StreamAccumulator]]:
    target = TargetConfig(base_url=server.url, model="m", timeout_s=5.0)
    client = make_client(target, transport)
    session = RequestSession(client, target, WorkloadConfig(isl=8, osl=3), "m", transport=transport)
    assert session.stream_transport.name == transport  # no fallback on a direct connection
    return await run_requests(session, client, server, n)


def _assert_whole(rec: RequestRecord, acc: StreamAccumulator) -> None:
    assert rec.status == "ok", rec.error
    assert "".join(acc.pending_text) == "".join(WORDS)
    assert len(rec.chunk_ns) == len(WORDS) and rec.output_tokens == len(WORDS)
    assert rec.send_start_ns is not None and rec.first_byte_ns is not None
    assert rec.send_start_ns <= rec.sent_ns <= rec.first_byte_ns <= rec.chunk_ns[0] <= rec.end_ns


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_gzip_encoded_stream_is_inflated_as_it_arrives(transport: TransportName) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head(headers={"content-encoding": "gzip"})
        gz = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        for event in normal_stream(WORDS):
            await resp.send(gz.compress(event) + gz.flush(zlib.Z_SYNC_FLUSH))
        await resp.send(gz.flush())
        await resp.end()

    (rec,), (acc,) = await _records(await ScriptedServer(handler).start(), transport)
    _assert_whole(rec, acc)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_http_1_0_body_ends_where_the_server_closes(transport: TransportName) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        resp.writer.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        for event in normal_stream(WORDS):
            resp.writer.write(event)
            await resp.writer.drain()
            await asyncio.sleep(0.002)
        resp.writer.close()
        resp.closed = True

    server = await ScriptedServer(handler).start()
    records, accs = await _records(server, transport, n=2)
    for rec, acc in zip(records, accs, strict=True):
        _assert_whole(rec, acc)
    assert [r.conn_index for r in server.requests] == [0, 1]  # no keep-alive in HTTP/1.0


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_response_written_one_byte_at_a_time_headers_and_all(transport: TransportName) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        body = b"".join(normal_stream(WORDS))
        whole = (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        for i in range(len(whole)):
            resp.writer.write(whole[i : i + 1])
            await resp.writer.drain()
            if i % 8 == 0:
                await asyncio.sleep(0.001)  # lets the client read single bytes, headers included

    (rec,), (acc,) = await _records(await ScriptedServer(handler).start(), transport)
    _assert_whole(rec, acc)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_content_length_bodies_keep_one_connection_alive(transport: TransportName) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        body = b"".join(normal_stream(WORDS))
        await resp.head(headers={"content-length": str(len(body))}, chunked=False)
        await resp.send(body)

    server = await ScriptedServer(handler).start()
    records, accs = await _records(server, transport, n=4)
    for rec, acc in zip(records, accs, strict=True):
        _assert_whole(rec, acc)
    assert {r.conn_index for r in server.requests} == {0}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_chunked_streams_reuse_the_connection_and_carry_the_request(transport: TransportName) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head()
        for event in normal_stream(WORDS):
            await resp.send(event)
        await resp.end()

    server = await ScriptedServer(handler).start()
    records, accs = await _records(server, transport, n=3)
    for rec, acc in zip(records, accs, strict=True):
        _assert_whole(rec, acc)
    assert {r.conn_index for r in server.requests} == {0}
    first = server.requests[0]
    assert (first.method, first.path) == ("POST", "/v1/chat/completions")
    assert first.headers["x-tokentop-request-id"] == "0-0"
    assert first.headers["accept-encoding"] == "identity"
    assert first.headers["host"] == f"127.0.0.1:{server.port}"
    assert b'"stream":true' in first.body.replace(b" ", b"")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_redirect_is_not_followed_and_says_where_it_pointed(transport: TransportName) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        await resp.head(302, {"location": "http://elsewhere/v1/chat/completions", "content-length": "0"},
                        chunked=False)  # fmt: skip

    server = await ScriptedServer(handler).start()
    (rec,), _ = await _records(server, transport)
    assert (rec.error_class, rec.http_status) == ("not_sse", 302)
    assert rec.error == (
        "HTTP 302 redirect to http://elsewhere/v1/chat/completions: not followed for a stream; "
        "give the final URL"
    )
    assert len(server.requests) == 1


async def test_through_a_proxy_the_protocol_path_hands_over_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    target = TargetConfig(base_url="http://upstream.example:8000/v1", model="m")
    chosen = stream_transport(target, "protocol")
    assert chosen.name == "aiohttp" and chosen.note is not None and "proxy" in chosen.note
    assert stream_transport(TargetConfig(base_url="http://127.0.0.1:8000/v1", model="m", trust_env=False),
                            "protocol") == ("protocol", None)  # fmt: skip


async def test_a_header_section_past_the_cap_fails_without_growing() -> None:
    """A server that trickles headers without end: the protocol path stops at `MAX_HEADER_BYTES`."""
    from tui.engine.stream.h1 import MAX_HEADER_BYTES

    async def handler(req: Request, resp: Responder) -> None:
        resp.writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        for i in range(MAX_HEADER_BYTES // 1000 + 8):
            resp.writer.write(f"x-pad-{i}: {'a' * 1000}\r\n".encode())
            await resp.writer.drain()
            await asyncio.sleep(0)
        resp.abort()

    (rec,), _ = await _records(await ScriptedServer(handler).start(), "protocol")
    assert (rec.status, rec.error_class) == ("error", "disconnect")
    assert rec.error is not None and f"response headers over {MAX_HEADER_BYTES:,} bytes" in rec.error


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_connect_that_is_never_answered_times_out(transport: TransportName) -> None:
    """A listener whose accept queue is full drops new SYNs: the connect hangs until `connect_timeout_s`."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):  # fill the accept queue (its length is backlog + 1 on Linux)
            s = socket.socket()
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.connect(("127.0.0.1", port))
            fillers.append(s)
        await asyncio.sleep(0.05)
        target = TargetConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=5.0,
                              connect_timeout_s=0.3)  # fmt: skip
        client = make_client(target, transport)
        session = RequestSession(client, target, WorkloadConfig(isl=8, osl=3), "m", transport=transport)
        started = time.monotonic()
        try:
            rec = await run_request(session, RequestRecord(1, 0, 0, 1, 0), StreamAccumulator())
        finally:
            await session.aclose()
            await client.aclose()
        took = time.monotonic() - started
    finally:
        for s in fillers:
            s.close()
        listener.close()
    assert (rec.error_class, rec.error) == ("connect", "connect timeout")
    assert 0.3 <= took < 3.0
