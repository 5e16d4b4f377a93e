"""The simulator closes idle keep-alive connections like uvicorn does, and the engine rides over it.

Real servers drop a pooled connection that has sat idle (uvicorn's `timeout_keep_alive`, 5 s under vLLM and
SGLang); the sim does the same after `--keep-alive S`. These tests use 0.3 s. Every wait is bounded; the
only sleeps are the idle spells whose length is the thing under test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.engine_helpers import read_jsonl, running_handle, wait_for
from tests.support.sim_client import Conn, chat_body
from tui.cli import build_parser
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import make_client
from tui.sim.config import config_from_args
from tui.sim.launch import SimServer
from tui.sim.perf_model import PROFILES

pytestmark = pytest.mark.timeout(60)
KEEP_ALIVE_S = 0.3
EARLY_SLACK_S = 0.05
"""Timers may fire a hair early (uvloop counts whole milliseconds); the close must not come sooner."""
LATE_BOUND_S = 3.0
"""The close must come within this long: generous for a loaded CI machine, far below "never"."""


@pytest.fixture(scope="module")
def flat() -> Iterator[SimServer]:
    """The `flat` profile at real speed: 50 tok/s per stream, so 40 tokens stream for ~0.8 s."""
    with SimServer("flat", time_scale=1.0, keep_alive_s=KEEP_ALIVE_S) as server:
        yield server


async def _closed_after(conn: Conn) -> float:
    """Seconds until the server closes `conn` (EOF), bounded by LATE_BOUND_S."""
    t0 = time.monotonic()
    data = await asyncio.wait_for(conn.reader.read(), LATE_BOUND_S)
    assert data == b"", f"unexpected bytes on an idle connection: {data[:80]!r}"
    return time.monotonic() - t0


def test_keep_alive_flag_and_default() -> None:
    parser = build_parser()
    assert config_from_args(parser.parse_args(["sim"])).keep_alive_s == 5.0
    assert config_from_args(parser.parse_args(["sim", "--keep-alive", "0"])).keep_alive_s == 0.0
    assert config_from_args(parser.parse_args(["sim", "--keep-alive", "0.25"])).keep_alive_s == 0.25
    for bad in ("-1", "nan", "inf", "soon"):
        with pytest.raises(SystemExit):
            parser.parse_args(["sim", "--keep-alive", bad])


async def test_idle_connection_closed_after_keep_alive(flat: SimServer) -> None:
    conn = await Conn.open(flat.port)
    try:
        reply = await conn.call("GET", "/v1/models")
        assert reply.status == 200 and "connection" not in reply.headers
        idle_s = await _closed_after(conn)
        assert KEEP_ALIVE_S - EARLY_SLACK_S <= idle_s < LATE_BOUND_S
    finally:
        await conn.close()


async def test_connection_that_never_sends_is_closed_too(flat: SimServer) -> None:
    conn = await Conn.open(flat.port)
    try:
        assert KEEP_ALIVE_S - EARLY_SLACK_S <= await _closed_after(conn) < LATE_BOUND_S
    finally:
        await conn.close()


async def test_idle_clock_restarts_with_each_request(flat: SimServer) -> None:
    """Gaps shorter than the keep-alive, adding up to well over it, never lose the connection."""
    conn = await Conn.open(flat.port)
    try:
        t0 = time.monotonic()
        for _ in range(4):
            reply = await conn.call("GET", "/health")
            assert reply.status == 200 and reply.error is None
            await asyncio.sleep(KEEP_ALIVE_S / 2)  # the idle spell under test
        assert time.monotonic() - t0 > 2 * KEEP_ALIVE_S
        assert (await conn.call("GET", "/health")).status == 200
    finally:
        await conn.close()


async def test_stream_longer_than_keep_alive_is_not_cut(flat: SimServer) -> None:
    conn = await Conn.open(flat.port)
    try:
        t0 = time.monotonic()
        reply = await conn.call("POST", "/v1/chat/completions", chat_body(40))
        streamed_s = time.monotonic() - t0
        assert reply.error is None and reply.done, reply.error
        assert len(reply.text_events()) == 40
        assert streamed_s > 2 * KEEP_ALIVE_S  # it really outlasted the keep-alive
        # the idle clock starts only when the stream has ended
        assert KEEP_ALIVE_S - EARLY_SLACK_S <= await _closed_after(conn) < LATE_BOUND_S
    finally:
        await conn.close()


async def test_silent_stream_is_not_cut() -> None:
    """A stalled response (no bytes for several keep-alives) is in progress, not idle: only the client ends
    it."""
    with SimServer("small-gpu", time_scale=20, keep_alive_s=KEEP_ALIVE_S, faults={"stall": 1.0}) as sim:
        conn = await Conn.open(sim.port)
        try:
            reply = await conn.call("POST", "/v1/chat/completions", chat_body(50), idle_timeout_s=1.0)
            assert reply.status == 200 and reply.error == "timeout"  # silent, but never closed ("eof")
        finally:
            await conn.close()


async def test_zero_keeps_idle_connections_open() -> None:
    with SimServer("small-gpu", time_scale=20, keep_alive_s=0) as sim:
        conn = await Conn.open(sim.port)
        try:
            assert (await conn.call("GET", "/health")).status == 200
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(conn.reader.read(), 3 * KEEP_ALIVE_S)  # the idle spell under test
            assert (await conn.call("GET", "/health")).status == 200
        finally:
            await conn.close()


# --- end to end through the engine ----------------------------------------------------------------------


def _open_tcp(pid: int) -> int:
    """Established (or half-closed) TCP connections the process holds, its listening socket excluded."""
    conns = psutil.Process(pid).net_connections(kind="tcp")
    return sum(c.status in (psutil.CONN_ESTABLISHED, psutil.CONN_CLOSE_WAIT) for c in conns)


def _wait(pred: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def test_engine_resumes_cleanly_after_the_server_closed_its_idle_connections(tmp_path: Path) -> None:
    users = 4
    with (
        SimServer("small-gpu", time_scale=20, keep_alive_s=KEEP_ALIVE_S) as sim,
        running_handle(
            sim.url, LoadTarget(concurrency=users), tmp_path, workload=WorkloadConfig(isl=16, osl=8)
        ) as handle,
    ):
        assert sim.process is not None
        pid = sim.process.pid
        wait_for(handle, lambda s: s.completed >= 5 * users, 20, "warm-up requests")
        assert _open_tcp(pid) >= 1

        handle.set_load(LoadTarget(concurrency=users, paused=True))
        wait_for(handle, lambda s: s.in_flight == 0, 10, "in-flight requests to end")
        # The server drops every pooled connection once it has sat idle for the keep-alive.
        _wait(lambda: _open_tcp(pid) == 0, LATE_BOUND_S, "the sim to close the idle connections")
        before = handle.snapshot()
        assert before.failed == 0

        handle.set_load(LoadTarget(concurrency=users))
        resumed_level = handle.level_id
        wait_for(handle, lambda s: s.completed >= before.completed + 5 * users, 20, "requests after resume")
        after = handle.snapshot()
        assert after.failed == 0, after.recent_errors

    records = read_jsonl(tmp_path / "requests.jsonl")
    resumed = [r for r in records if r["level"] == resumed_level and r["status"] != "cancelled"]
    assert len(resumed) >= 5 * users
    assert all(r["status"] == "ok" for r in resumed), [r["error"] for r in resumed if r["status"] != "ok"]


@pytest.mark.parametrize("transport", ["protocol", "aiohttp", "httpx"])
async def test_idle_spells_around_the_servers_keep_alive_fail_no_request(transport: str) -> None:
    """The real race: the client reuses a pooled connection just as the server's keep-alive ends, so a
    request can meet a closed socket before any response byte; none may fail, and one that met it was
    retried once, transparently.

    Idle spells sweep the keep-alive from 6 ms short of it to 1 ms past, twice over (the window sits
    1-3 ms short for aiohttp and httpx: the client's end of a response lags the server's; the protocol path
    reads the server's close within tens of microseconds, so whether a sweep meets the race there is luck).
    That a stale connection is retried is asserted on every transport, without luck, by
    `test_client.py::test_stale_keepalive_connection_is_retried_once`."""
    keep_alive_s = 0.05
    with SimServer("small-gpu", time_scale=20, keep_alive_s=keep_alive_s) as sim:
        target = TargetConfig(base_url=sim.url, timeout_s=10)
        client = make_client(target, transport)
        session = RequestSession(
            client, target, WorkloadConfig(isl=16, osl=4), PROFILES["small-gpu"].model, transport=transport
        )
        try:
            for seq in range(1, 2 * 29 + 1):
                rec = await run_request(session, RequestRecord(seq, 0, seq, 1, 0), StreamAccumulator())
                assert rec.status == "ok", (seq, rec.error_class, rec.error)
                assert rec.retries <= 1
                offset_s = (seq % 29 - 24) * 0.00025  # -6 ms .. +1 ms
                await asyncio.sleep(keep_alive_s + offset_s)  # the idle spell under test
        finally:
            await session.aclose()
            await client.aclose()
