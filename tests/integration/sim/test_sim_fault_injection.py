"""Each injected fault, at rate 1, as a client sees it and as the truth log records it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.sim_client import Conn, call, chat_body
from tui.sim.launch import SimServer

CHAT = "/v1/chat/completions"


def truth_lines(path: Path, count: int, *, timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """The first `count` truth-log lines, waiting (bounded) for the server to write them."""
    deadline = time.monotonic() + timeout_s
    while True:
        lines = [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []
        if len(lines) >= count:
            return lines
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(lines)} truth lines, wanted {count}")
        time.sleep(0.01)  # polling a file the server appends to, under a deadline


def faulty(kind: str, truth: Path, rate: float = 1.0, **kwargs: Any) -> SimServer:
    return SimServer("small-gpu", time_scale=20, faults={kind: rate}, truth_log=truth, **kwargs)


async def test_error500(tmp_path: Path) -> None:
    with faulty("error500", tmp_path / "t") as sim:
        reply = await call(sim.port, "POST", CHAT, chat_body(5))
        (record,) = truth_lines(tmp_path / "t", 1)
    assert reply.status == 500
    assert reply.json()["error"]["type"] == "server_error"
    assert record["status"] == "error" and record["fault"] == "error500" and record["http_status"] == 500


async def test_error429_says_when_to_retry(tmp_path: Path) -> None:
    with faulty("error429", tmp_path / "t") as sim:
        reply = await call(sim.port, "POST", CHAT, chat_body(5))
    assert reply.status == 429 and reply.headers["retry-after"] == "1"
    assert reply.json()["error"]["code"] == "rate_limit_exceeded"


async def test_disconnect_mid_stream(tmp_path: Path) -> None:
    with faulty("disconnect", tmp_path / "t") as sim:
        reply = await call(sim.port, "POST", CHAT, chat_body(40))
        (record,) = truth_lines(tmp_path / "t", 1)
    received = len(reply.text_events())
    assert reply.status == 200 and reply.error == "eof" and not reply.done
    assert 1 <= received < 40
    assert record["status"] == "disconnected" and record["fault"] == "disconnect"
    assert record["completion_tokens"] == received == len(record["chunk_ns"])


async def test_stall_keeps_the_connection_silent(tmp_path: Path) -> None:
    with faulty("stall", tmp_path / "t") as sim:
        conn = await Conn.open(sim.port)
        reply = await conn.call("POST", CHAT, chat_body(40), idle_timeout_s=0.3)
        still_open = not conn.reader.at_eof()
        await conn.close()  # the client gives up; only now does the server log it
        (record,) = truth_lines(tmp_path / "t", 1)
        metrics = (await call(sim.port, "GET", "/metrics")).body.decode()
    assert reply.status == 200 and reply.error == "timeout" and still_open
    assert 1 <= len(reply.text_events()) < 40
    assert record["status"] == "disconnected" and record["fault"] == "stall"
    assert record["end_ns"] - record["chunk_ns"][-1] >= 0.25e9
    assert "vllm:num_requests_running{" in metrics and "} 0\n" in metrics.split("running{")[1][:60]


async def test_malformed_line_then_the_stream_carries_on(tmp_path: Path) -> None:
    with faulty("malformed", tmp_path / "t") as sim:
        reply = await call(sim.port, "POST", CHAT, chat_body(20))
        (record,) = truth_lines(tmp_path / "t", 1)
    bad = []
    for _, data in reply.events[:-1]:  # the last is [DONE]
        try:
            orjson.loads(data)
        except orjson.JSONDecodeError:
            bad.append(data)
    assert len(bad) == 1
    assert reply.done and reply.error is None
    assert len(reply.text_events()) == 20
    assert record["status"] == "ok" and record["fault"] == "malformed" and record["completion_tokens"] == 20


async def test_queue503_rejects_when_too_many_would_wait(tmp_path: Path) -> None:
    truth = tmp_path / "t"
    with faulty("queue503", truth, rate=1, extra_args=["--max-seqs", "2"]) as sim:
        replies = await asyncio.gather(*(call(sim.port, "POST", CHAT, chat_body(30)) for _ in range(6)))
        records = truth_lines(truth, 6)
    statuses = sorted(r.status for r in replies)
    # Two run; with queue503=1 one more may wait; the rest are turned away.
    assert statuses.count(200) in (2, 3) and statuses.count(503) == 6 - statuses.count(200)
    rejected = [r for r in replies if r.status == 503]
    assert rejected[0].headers["retry-after"] == "1"
    assert rejected[0].json()["error"]["code"] == "overloaded"
    assert sum(r["fault"] == "queue503" for r in records) == len(rejected)


@pytest.mark.parametrize("kind", ["disconnect", "stall"])
async def test_mid_stream_faults_on_non_streaming_requests_send_nothing(tmp_path: Path, kind: str) -> None:
    with faulty(kind, tmp_path / "t") as sim:
        reply = await call(sim.port, "POST", CHAT, chat_body(30, stream=False), idle_timeout_s=0.3)
    assert reply.status == 0 and reply.error == ("eof" if kind == "disconnect" else "timeout")


async def test_fault_rate_is_a_rate(tmp_path: Path) -> None:
    with faulty("error500", tmp_path / "t", rate=0.5, seed=3) as sim:
        conn = await Conn.open(sim.port)
        try:
            statuses = [(await conn.call("POST", CHAT, chat_body(1))).status for _ in range(60)]
        finally:
            await conn.close()
    assert 15 <= statuses.count(500) <= 45 and statuses.count(500) + statuses.count(200) == 60
