"""Exact input lengths by the server's own count, against the simulator's tokenizer rule (not one token per
word; chat adds a template): the ISL probe sizes even the first request, the answers keep it there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.engine.engine_helpers import read_jsonl, wait_for
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.host.isl_probe import probe_isl
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with SimServer("flat", time_scale=10.0) as sim:
        yield sim.start().url


def run_isl(url: str, tmp_path: Path, endpoint: str, isl: int, *, probe: bool, requests: int) -> list[int]:
    target = TargetConfig(base_url=url, endpoint=endpoint)  # type: ignore[arg-type]
    log = tmp_path / f"{endpoint}-{isl}-{probe}.jsonl"
    handle = EngineHandle(
        target,
        WorkloadConfig(isl=isl, osl=4),
        LoadTarget(concurrency=2),
        requests_log=log,
        options=EngineOptions(isl_probe=probe, server_metrics=False),
    )
    handle.start()
    try:
        assert handle.wait_ready(30.0)
        wait_for(handle, lambda s: s.completed >= requests, 60, f"{requests} requests")
    finally:
        handle.stop(drain=True, timeout_s=10.0)
    records = sorted(read_jsonl(log), key=lambda r: r["sent_ns"])
    assert all(r["status"] == "ok" and r["input_source"] == "usage" for r in records)
    return [r["input_tokens"] for r in records]


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("isl", [64, 200, 1000])
def test_mean_isl_is_the_target_from_the_first_request(
    sim_url: str, tmp_path: Path, endpoint: str, isl: int
) -> None:
    isls = run_isl(sim_url, tmp_path, endpoint, isl, probe=True, requests=12)
    assert abs(np.mean(isls) - isl) <= 1.0, isls


def test_without_the_probe_three_answers_calibrate(sim_url: str, tmp_path: Path) -> None:
    isls = run_isl(sim_url, tmp_path, "chat", 200, probe=False, requests=16)
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
