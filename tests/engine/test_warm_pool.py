"""Connections opened ahead of the requests that use them (a trace replay's first sends), against a real
server on 127.0.0.1: the protocol path opens them and its requests go out on them; httpx opens none."""

from __future__ import annotations

import asyncio

import pytest

from tests.engine.scripted_server import Request, Responder, ScriptedServer, normal_stream
from tui.engine.config import TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import make_client

pytestmark = pytest.mark.timeout(20)


async def _stream(req: Request, resp: Responder) -> None:
    await resp.head()
    for event in normal_stream(["one", " two"]):
        await resp.send(event)
    await resp.end()


async def _session(server: ScriptedServer, transport: str) -> RequestSession:
    target = TargetConfig(base_url=server.url, model="m", timeout_s=5.0)
    return RequestSession(make_client(target, transport), target, WorkloadConfig(isl=8, osl=2), "m",
                          transport=transport)  # fmt: skip


async def test_a_warmed_pool_sends_its_first_requests_on_connections_already_open() -> None:
    server = await ScriptedServer(_stream).start()
    session = await _session(server, "protocol")
    try:
        assert await session.warm(2) == 2
        assert await session.warm(2) == 0  # both are idle and open: nothing more to open
        assert session.streams is not None and len(session.streams.pool.idle) == 2
        records = [RequestRecord(request_id=i + 1, worker=0, seq=i, level_id=1, sent_ns=0) for i in range(2)]
        await asyncio.gather(*(run_request(session, rec, StreamAccumulator()) for rec in records))
        assert [rec.status for rec in records] == ["ok", "ok"]
        # the two requests in flight at once went out on the two warmed connections, no third one opened
        assert sorted(r.conn_index for r in server.requests) == [0, 1]
        assert server._conns == 2
    finally:
        await session.aclose()
        if session.client is not None:
            await session.client.aclose()
        await server.close()


async def test_a_warm_that_cannot_connect_opens_nothing_and_raises_nothing() -> None:
    server = await ScriptedServer(_stream).start()
    port = server.port
    await server.close()
    target = TargetConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=5.0)
    session = RequestSession(make_client(target, "protocol"), target, WorkloadConfig(isl=8, osl=2), "m",
                             transport="protocol")  # fmt: skip
    try:
        assert await session.warm(2) == 0
    finally:
        await session.aclose()


async def test_over_httpx_a_warm_opens_no_connection() -> None:
    server = await ScriptedServer(_stream).start()
    session = await _session(server, "aiohttp")
    try:
        assert session.streams is None and await session.warm(2) == 0
        await asyncio.sleep(0)
        assert server._conns == 0
    finally:
        if session.client is not None:
            await session.client.aclose()
        await server.close()
