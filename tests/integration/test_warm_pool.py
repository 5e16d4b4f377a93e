"""Connections opened ahead of the requests that use them (a trace replay's first sends), against a real
server on 127.0.0.1: the protocol path opens them and its requests go out on them; httpx opens none. A
request held to its schedule has its connection ready before the hold, so a connect never makes it late."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from tests.support.scripted_server import Request, Responder, ScriptedServer, normal_stream
from tui.engine.config import TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.h1 import Connection
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


async def _close(session: RequestSession, server: ScriptedServer) -> None:
    await session.aclose()
    if session.client is not None:
        await session.client.aclose()
    await server.close()


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
        await _close(session, server)


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


CONNECT_S = 0.3
"""A connect made slow on purpose: a request that connected after its hold would be this late."""


async def _slow_connects(session: RequestSession, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every connect of the session's pool takes `CONNECT_S` longer; returns their start stamps."""
    assert session.streams is not None
    pool = session.streams.pool
    real, started = pool.connect, []

    async def slow() -> Connection:
        started.append(time.perf_counter_ns())
        await asyncio.sleep(CONNECT_S)
        return await real()

    monkeypatch.setattr(pool, "connect", slow)
    return started


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(2000):
        if check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the condition did not come within 2 s")


async def test_a_held_request_connects_before_its_moment_and_only_writes_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arrived: list[int] = []

    async def stamped(req: Request, resp: Responder) -> None:
        arrived.append(time.perf_counter_ns())
        await _stream(req, resp)

    server = await ScriptedServer(stamped).start()
    session = await _session(server, "protocol")
    try:
        connects = await _slow_connects(session, monkeypatch)
        due = time.perf_counter_ns() + int(2 * CONNECT_S * 1e9)
        rec = RequestRecord(request_id=1, worker=0, seq=0, level_id=1, sent_ns=0, scheduled_ns=due)
        await run_request(session, rec, StreamAccumulator())
        assert rec.status == "ok", rec.error
        assert len(connects) == 1 and connects[0] < due - CONNECT_S * 1e9  # connected well ahead of it
        # written at the moment, not a connect later; and the hold is not counted as the client's overhead
        assert rec.send_start_ns is not None and due <= rec.send_start_ns <= rec.sent_ns
        assert rec.sent_ns - due < CONNECT_S * 1e9 / 2, (rec.sent_ns - due) / 1e6
        assert due <= arrived[0] and arrived[0] - due < CONNECT_S * 1e9 / 2
    finally:
        await _close(session, server)


async def _held_on_its_warm_connection(
    session: RequestSession, ahead_s: float
) -> tuple[Connection, RequestRecord, asyncio.Task[RequestRecord]]:
    """One warmed connection, and a request due ``ahead_s`` from now holding on it: (the connection, the
    request's record, its task)."""
    assert session.streams is not None
    pool = session.streams.pool
    assert await session.warm(1) == 1
    held = pool.idle[0]
    rec = RequestRecord(request_id=1, worker=0, seq=0, level_id=1, sent_ns=0,
                        scheduled_ns=time.perf_counter_ns() + int(ahead_s * 1e9))  # fmt: skip
    task = asyncio.ensure_future(run_request(session, rec, StreamAccumulator()))
    await _until(lambda: not pool.idle)  # checked out, and holding
    return held, rec, task


async def test_a_connection_lost_during_the_hold_is_replaced_and_the_request_still_goes() -> None:
    server = await ScriptedServer(_stream).start()
    session = await _session(server, "protocol")
    try:
        held, rec, task = await _held_on_its_warm_connection(session, 0.2)
        held.abort()
        await task
        assert rec.status == "ok", rec.error
        assert [r.conn_index for r in server.requests] == [1]  # on a second connection, the first unused
    finally:
        await _close(session, server)


async def test_a_request_cancelled_in_its_hold_gives_its_connection_back() -> None:
    server = await ScriptedServer(_stream).start()
    session = await _session(server, "protocol")
    assert session.streams is not None
    pool = session.streams.pool
    try:
        held, rec, task = await _held_on_its_warm_connection(session, 10.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert rec.status == "cancelled" and pool.idle == [held] and not held.closed
        assert server.requests == []
    finally:
        await _close(session, server)


async def test_a_retry_after_a_stale_connection_goes_out_on_a_new_one() -> None:
    """A server that closes each connection after an answer (llama.cpp) can have let every idle one go
    before the client reads the close: the request written on one is retried once, and on a new
    connection, not on the next idle one the server has dropped the same way."""

    async def dropped_if_idle_before(req: Request, resp: Responder) -> None:
        if req.conn_index < 2:  # the two warmed connections: the server has let them go
            resp.abort()
            return
        await _stream(req, resp)

    server = await ScriptedServer(dropped_if_idle_before).start()
    session = await _session(server, "protocol")
    try:
        assert await session.warm(2) == 2
        rec = RequestRecord(request_id=1, worker=0, seq=0, level_id=1, sent_ns=0)
        await run_request(session, rec, StreamAccumulator())
        assert rec.status == "ok" and rec.retries == 1, (rec.status, rec.error)
        assert [r.conn_index for r in server.requests] == [1, 2]  # the newest idle one, then a new one
    finally:
        await _close(session, server)
