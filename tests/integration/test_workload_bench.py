"""Shaped workloads end to end: a broken dataset stops `tokentop bench` with one line and exit status 2;
a dataset and a multi-turn conversation run against the simulator on 127.0.0.1; cached prompt tokens are
read from a server that reports them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.engine_helpers import bench
from tests.support.scripted_server import Request, Responder, ScriptedServer, chat_chunk, sse, usage_chunk
from tui.engine.config import TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import make_client
from tui.engine.workload import build_workload
from tui.sim.launch import SimServer
from tui.sim.perf_model import PROFILES

pytestmark = pytest.mark.timeout(60)

DATA = Path(__file__).resolve().parents[1] / "data"
NO_SERVER = "http://127.0.0.1:9"
"""Nothing listens there: a dataset is checked before the server is probed, so these never connect."""


@pytest.mark.parametrize(
    ("name", "content", "extra", "expected"),
    [
        ("missing.jsonl", None, [], "missing.jsonl: no such file"),
        ("empty.jsonl", "", [], "empty.jsonl: the file is empty"),
        ("broken.jsonl", '{"prompt": "a"}\n{"prompt": \n', [], "broken.jsonl line 2: not valid JSON"),
        ("share.json", '[\n {"conversations": 3}\n]', [], 'line 2: entry 1: "conversations" must be'),
        ("words.txt", "plain words\n", ["--dataset-format", "jsonl"], "words.txt line 1: not valid JSON"),
        ("chat.jsonl", '{"messages": [{"role": "user", "content": "a"}]}\n', ["--endpoint", "completions"],
         "chat.jsonl: has chat messages, which need the chat endpoint"),
    ],
)  # fmt: skip
def test_a_bad_dataset_is_one_line_and_exit_2(
    tmp_path: Path, name: str, content: str | None, extra: list[str], expected: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    proc = bench("--url", NO_SERVER, "--dataset", str(path), *extra, "--quiet", timeout_s=30)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("tokentop: error: " + str(tmp_path)) and expected in lines[0]
    assert "Traceback" not in proc.stderr


def test_a_dataset_runs_against_the_simulator_with_its_own_output_lengths(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    proc = bench(
        "--dataset", str(DATA / "sample.jsonl"), "--osl", "6", "--requests", "10", "--concurrency", "2",
        "--sim-time-scale", "20", "--requests-log", str(log), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) >= 10 and all(r["status"] == "ok" for r in records)
    # the file's lengths where a line gives one (24, 8, 20), --osl elsewhere
    assert {r["output_tokens"] for r in records} == {24, 6, 8, 20}


def test_turns_grow_each_users_prompt_and_restart_through_the_engine(tmp_path: Path) -> None:
    """The closed-loop user index reaches the workload through the worker: one user, 3 turns each."""
    log = tmp_path / "requests.jsonl"
    proc = bench(
        "--turns", "3", "--isl", "8", "--osl", "4", "--requests", "7", "--concurrency", "1",
        "--sim-time-scale", "20", "--requests-log", str(log), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda r: r["id"])
    isl = [r["input_tokens"] for r in records]
    assert all(r["input_source"] == "usage" for r in records)
    assert len(isl) >= 7
    for start in range(0, len(isl) - 2, 3):
        a, b, c = isl[start : start + 3]
        assert a < b < c, isl  # each turn holds the last question and its reply
        if start + 3 < len(isl):
            assert isl[start + 3] < c, isl  # a new conversation after 3 turns


async def test_a_conversation_against_the_simulator_grows_then_restarts() -> None:
    workload = build_workload(WorkloadConfig(isl=10, osl=5, turns=3, seed=4))
    with SimServer("small-gpu", time_scale=20) as sim:
        target = TargetConfig(base_url=sim.url, timeout_s=10)
        client = make_client(target)
        session = RequestSession(client, target, workload, PROFILES["small-gpu"].model)
        records = []
        try:
            for seq in range(7):
                for user in (0, 1):  # two users interleaved keep apart histories
                    record = RequestRecord(
                        request_id=seq + 1, worker=0, seq=2 * seq + user, level_id=1, sent_ns=0
                    )
                    records.append(await run_request(session, record, StreamAccumulator(), user=user))
        finally:
            await client.aclose()
    assert [r.status for r in records] == ["ok"] * 14, [r.error for r in records]
    for user in (0, 1):
        isl = [r.input_tokens or 0 for r in records[user::2]]
        assert (
            isl[0] < isl[1] < isl[2] and isl[3] < isl[2] and isl[3] < isl[4] < isl[5] and isl[6] < isl[5]
        ), isl
        # the server's count of turn 2 is turn 1's prompt, its 5-token reply and a new question of ~10
        assert isl[1] - isl[0] >= 5 + 10 - 2, isl


async def test_cached_prompt_tokens_are_read_from_usage() -> None:
    async def cached(req: Request, resp: Responder) -> None:
        usage = usage_chunk(40, 1)
        usage["usage"]["prompt_tokens_details"] = {"cached_tokens": 32}  # type: ignore[index]
        await resp.head()
        for ev in (sse(chat_chunk("x")), sse(chat_chunk(finish="stop")), sse(usage), sse("[DONE]")):
            await resp.send(ev)
        await resp.end()

    server = await ScriptedServer(cached).start()
    try:
        target = TargetConfig(server.url, "m", timeout_s=5)
        client = make_client(target)
        session = RequestSession(client, target, WorkloadConfig(isl=4, osl=1), "m")
        record = RequestRecord(request_id=1, worker=0, seq=0, level_id=1, sent_ns=0)
        try:
            await run_request(session, record, StreamAccumulator())
        finally:
            await client.aclose()
    finally:
        await server.close()
    assert record.status == "ok", record.error
    assert (record.input_tokens, record.cached_tokens) == (40, 32)
    assert record.to_json()["cached_tokens"] == 32
