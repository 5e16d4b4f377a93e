"""Exact input lengths by the server's own count, against the simulator's tokenizer rule (not one token per
word; chat adds a template): the ISL probe sizes even the first request, the answers keep it there; a shared
prefix adds exactly its N tokens, and a conversation's turns each add ``--isl`` to the history."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.engine_helpers import read_jsonl, wait_for
from tests.support.scripted_server import Request, Responder, ScriptedServer, ThreadedServer, normal_stream
from tui.engine.config import EngineOptions, LengthDist, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.host.isl_probe import probe_isl
from tui.engine.workload.prefix import prefix_text
from tui.engine.workload.protocol import RequestKey
from tui.engine.workload.shaped import ShapedWorkload
from tui.engine.workload.synthetic import MAX_PROMPT_FACTOR
from tui.sim.launch import SimServer
from tui.sim.tokens import count_prompt_tokens

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with SimServer("flat", time_scale=10.0) as sim:
        yield sim.start().url


def run_records(
    url: str,
    tmp_path: Path,
    endpoint: str,
    isl: int,
    *,
    probe: bool,
    requests: int,
    workload: WorkloadConfig | None = None,
    users: int = 2,
) -> list[dict[str, Any]]:
    """Each request's record, in the order they were sent (every one ok, its input counted by the server)."""
    target = TargetConfig(base_url=url, endpoint=endpoint)  # type: ignore[arg-type]
    log = tmp_path / f"{endpoint}-{isl}-{probe}.jsonl"
    handle = EngineHandle(
        target,
        workload or WorkloadConfig(isl=isl, osl=4),
        LoadTarget(concurrency=users),
        requests_log=log,
        options=EngineOptions(isl_probe=probe, server_metrics=False),
    )
    handle.start()
    try:
        assert handle.wait_ready(30.0)
        wait_for(handle, lambda s: s.completed >= requests, 60, f"{requests} requests")
    finally:
        handle.stop(finish_in_flight=True, timeout_s=10.0)
    records = sorted(read_jsonl(log), key=lambda r: r["sent_ns"])
    assert all(r["status"] == "ok" and r["input_source"] == "usage" for r in records)
    return records


def input_tokens(records: list[dict[str, Any]]) -> list[int]:
    """The input tokens the server counted for each record."""
    return [r["input_tokens"] for r in records]


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("isl", [64, 200, 1000])
def test_mean_isl_is_the_target_from_the_first_request(
    sim_url: str, tmp_path: Path, endpoint: str, isl: int
) -> None:
    isls = input_tokens(run_records(sim_url, tmp_path, endpoint, isl, probe=True, requests=12))
    assert abs(np.mean(isls) - isl) <= 1.0, isls


def test_without_the_probe_three_answers_calibrate(sim_url: str, tmp_path: Path) -> None:
    isls = input_tokens(run_records(sim_url, tmp_path, "chat", 200, probe=False, requests=16))
    assert abs(isls[0] - 200) > 10  # sized blind: words are not tokens here
    assert abs(np.mean(isls[4:]) - 200) <= 1.0, isls  # two users: two blind, then learned


def test_the_probe_learns_the_chat_template(sim_url: str) -> None:
    chat = probe_isl(TargetConfig(base_url=sim_url), WorkloadConfig(isl=100), "sim-flat")
    done = probe_isl(
        TargetConfig(base_url=sim_url, endpoint="completions"), WorkloadConfig(isl=100), "sim-flat"
    )
    assert chat.notice is None and len(chat.prompt_tokens) == 4 and len(chat.workload.isl_observations) == 4
    # the first probe prompt is the same text on both endpoints: chat costs the template (4 + 3) more
    assert chat.prompt_tokens[0] - done.prompt_tokens[0] == 7
    assert abs(chat.prompt_tokens[-1] - 100) <= 2


def test_a_probe_that_gets_no_usage_says_so_once(tmp_path: Path) -> None:
    probe = probe_isl(
        TargetConfig(base_url="http://127.0.0.1:9/v1", connect_timeout_s=1), WorkloadConfig(), "m"
    )
    assert probe.notice is not None and probe.notice.startswith("ISL probe:") and probe.prompt_tokens == ()
    assert probe.workload.isl_observations == ()


# --- a shared prefix adds its N tokens ---------------------------------------------------------


@pytest.mark.parametrize("probe", [True, False])
def test_the_probe_sizes_a_shared_prefix_to_n_tokens(sim_url: str, probe: bool, tokenizer_file: str) -> None:
    workload = WorkloadConfig(isl=32, shared_prefix=256, tokenizer=None if probe else tokenizer_file)
    found = probe_isl(TargetConfig(base_url=sim_url), workload, "sim-flat")
    if probe:  # no tokenizer: the probe measured which word count the server counts as 256 tokens
        assert found.notice is None and found.workload.shared_prefix_sized is not None
        assert found.workload.shared_prefix_sized[1] == 256
    else:  # a tokenizer cuts the prefix itself: nothing to measure
        assert found.workload.shared_prefix_sized is None
    prefix = prefix_text(found.workload)
    assert prefix.endswith("\n\n") and count_prompt_tokens(prefix) == 256  # the simulator's own rule


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("local_tokenizer", [False, True])
def test_a_shared_prefix_adds_n_tokens_to_the_isl(
    sim_url: str, tmp_path: Path, endpoint: str, local_tokenizer: bool, tokenizer_file: str
) -> None:
    tokenizer = tokenizer_file if local_tokenizer else None
    workload = WorkloadConfig(isl=32, osl=4, shared_prefix=256, tokenizer=tokenizer)
    isls = input_tokens(
        run_records(sim_url, tmp_path, endpoint, 32, probe=True, requests=12, workload=workload)
    )
    assert abs(np.mean(isls) - (256 + 32)) <= 1.0, isls


# --- drawn lengths are each by the server's count ---------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("local_tokenizer", [False, True])
def test_each_drawn_isl_is_by_the_servers_count(
    sim_url: str, tmp_path: Path, endpoint: str, local_tokenizer: bool, tokenizer_file: str
) -> None:
    """``--isl-dist uniform:40:240``: each request costs the ISL drawn for it, by the server's count (the
    probe sized even the first). They were drawn words: the chat template alone put them 10+ tokens off."""
    workload = WorkloadConfig(
        isl=64,
        osl=4,
        isl_dist=LengthDist("uniform", 40, 240),
        tokenizer=tokenizer_file if local_tokenizer else None,
    )
    records = run_records(sim_url, tmp_path, endpoint, 64, probe=True, requests=16, workload=workload)
    drawn = ShapedWorkload(workload)
    off = []
    for r in records:
        worker, seq = (int(part) for part in r["client_request_id"].split("-"))
        asked, _, _ = drawn.lengths(RequestKey(worker, seq))
        off.append(r["input_tokens"] - asked)
    assert len(off) >= 16 and off == [0] * len(off), off  # the simulator counts one token a word: exact


# --- a conversation's turns each add --isl to its history --------------------------------------


def test_each_turn_adds_isl_tokens_to_the_turn_before(sim_url: str, tmp_path: Path) -> None:
    turns, isl = 3, 40
    workload = WorkloadConfig(isl=isl, osl=16, turns=turns)
    records = run_records(
        sim_url, tmp_path, "chat", isl, probe=True, requests=8 * turns, workload=workload, users=1
    )
    isls = [r["input_tokens"] for r in records]
    osls = [r["output_tokens"] for r in records]
    assert osls == [16] * len(records)
    first = [isls[i] for i in range(0, len(isls), turns)]  # one user: turns 1, 2, 3, 1, 2, 3, ...
    added = [isls[i] - isls[i - 1] - osls[i - 1] for i in range(len(isls)) if i % turns]
    assert all(isls[i] > isls[i - 1] + osls[i - 1] for i in range(len(isls)) if i % turns), isls  # it grows
    assert abs(np.mean(first) - isl) <= 1.0, first  # the first turn is --isl, sized by the probe
    # the later turns' questions calibrate from their own first answers, then add --isl each; "added" also
    # carries the reply counted again as prompt text (the server's count of its words need not be the 16
    # tokens it generated), so it is held to ±2.5, not ±1 (seen: 38.1 and 40.5 in two runs)
    assert abs(np.mean(added[2:]) - isl) <= 2.5, added
    # the first later turn is sized by the first turns' calibration (45-49 seen; sized blind: 77), off by
    # the later template and the reply counted again as text (as "added" always is)
    assert abs(added[0] - isl) <= 15, added


# --- a server whose counts do not grow with the prompt ---------------------------------------------------


def _one_token_server() -> ThreadedServer:
    """Counts every prompt as 1 token, whatever its length, streaming or not (a broken usage report)."""

    async def handler(req: Request, resp: Responder) -> None:
        if req.method == "GET":  # /models
            await resp.json(200, b'{"data": [{"id": "m"}]}')
            return
        words = len(json.loads(req.body)["messages"][0]["content"].split())
        sizes.append(words)
        if not json.loads(req.body).get("stream"):
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            body = {"choices": [{"message": {"content": "a"}, "finish_reason": "length"}], "usage": usage}
            await resp.json(200, json.dumps(body).encode())
            return
        await resp.head()
        for piece in normal_stream(["a", "b"], prompt_tokens=1):
            await resp.send(piece)
        await resp.end()

    sizes: list[int] = []
    server = ThreadedServer(ScriptedServer(handler))
    server.sizes = sizes  # type: ignore[attr-defined]
    return server


def test_counts_that_do_not_grow_are_refused_and_no_prompt_is_blown_up(tmp_path: Path) -> None:
    """The probe's counts (1 token for 100 words) are refused with one notice and teach the workers nothing;
    the run's own answers say the same, and no prompt ever grows past a few times the asked ISL (a
    calibration that believed them sent 33,000-token prompts for --isl 100)."""
    with _one_token_server() as server:
        probe = probe_isl(TargetConfig(base_url=server.url), WorkloadConfig(isl=100, osl=4), "m")
        assert probe.notice is not None and "do not grow with the prompt" in probe.notice, probe.notice
        assert probe.workload.isl_observations == ()
        assert max(server.sizes) <= MAX_PROMPT_FACTOR * 100  # type: ignore[attr-defined]
        probes = len(server.sizes)  # type: ignore[attr-defined]
        run_records(server.url, tmp_path, "chat", 100, probe=True, requests=12)
        sent = server.sizes[probes:]  # type: ignore[attr-defined]
    assert len(sent) >= 12
    assert max(sent) <= MAX_PROMPT_FACTOR * 100, sent
