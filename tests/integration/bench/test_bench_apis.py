"""``--api``: one short bench per new API against one simulator, side by side, read back by several tests
(chat and completions have their own bench tests; `tests/integration/test_endpoint_path.py` every path).

Each run's results, requests log and table are held to the simulator's truth log (what it was asked and
what it sent) and its ``/metrics``: the ISL by the server's usage where each API puts it, the OSL asked,
reasoning shown apart, and an embeddings run measured without output figures rather than with zeros.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import made_once
from tests.support.engine_helpers import read_jsonl
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(120)
OSL, REASONING = 8, 2
RUNS = ("responses", "messages", "embeddings")
STREAMED = [api for api in RUNS if api != "embeddings"]


def _run_all(folder: Path) -> None:
    """The benches side by side against one simulator that reasons, then its /metrics."""
    truth = folder / "truth.jsonl"
    with SimServer(time_scale=1, reasoning_tokens=REASONING, truth_log=truth) as sim:
        procs = {}
        for api in RUNS:
            args = ["--url", sim.url, "--api", api, "--concurrency", "2", "--requests", "6", "--isl", "32"]
            args += ["--osl", str(OSL), "--no-server-metrics", "--no-record"]
            args += ["--output", str(folder / f"{api}.json"), "--requests-log", str(folder / f"{api}.jsonl")]
            out = (folder / f"{api}.out").open("w")
            procs[api] = subprocess.Popen(
                [sys.executable, "-m", "tui", "bench", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL=""),
            )
        for api, proc in procs.items():
            (folder / f"{api}.rc").write_text(str(proc.wait(timeout=90)))
        # every request the benches logged is in the truth log once the simulator has seen it end
        sent = {(api, r["client_request_id"]) for api in RUNS for r in read_jsonl(folder / f"{api}.jsonl")}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if sent <= {(r["endpoint"], r["client_request_id"]) for r in read_jsonl(truth)}:
                break
            time.sleep(0.05)
        (folder / "metrics.txt").write_text(httpx.get(sim.url.removesuffix("/v1") + "/metrics").text)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return made_once(tmp_path_factory, "bench-apis", _run_all)


def _level(runs: Path, api: str) -> dict[str, Any]:
    assert (runs / f"{api}.rc").read_text() == "0", (runs / f"{api}.out").read_text()
    results = json.loads((runs / f"{api}.json").read_text())
    assert results["target"]["endpoint"] == api
    (level,) = results["levels"]
    return dict(level)


def _truth(runs: Path, api: str) -> dict[str, dict[str, Any]]:
    """The simulator's record of each of ``api``'s requests, by request id (the runs share ids)."""
    return {r["client_request_id"]: r for r in read_jsonl(runs / "truth.jsonl") if r["endpoint"] == api}


@pytest.mark.parametrize("api", RUNS)
def test_each_api_reaches_its_path_and_reads_isl_from_usage(runs: Path, api: str) -> None:
    level = _level(runs, api)
    assert level["completed"] >= 6 and level["failed"] == 0
    truth = _truth(runs, api)
    done = [r for r in read_jsonl(runs / f"{api}.jsonl") if r["status"] == "ok"]
    assert len(done) >= 6
    for rec in done:
        told = truth[rec["client_request_id"]]
        assert (rec["input_source"], rec["input_tokens"]) == ("usage", told["prompt_tokens"])
    assert level["mean_input_tokens"] == pytest.approx(32, abs=2)  # the ISL probe sized them by usage


@pytest.mark.parametrize("api", STREAMED)
def test_streamed_apis_count_the_osl_and_show_reasoning_apart(runs: Path, api: str) -> None:
    level = _level(runs, api)
    assert level["mean_output_tokens"] == OSL
    assert level["p50_ttft_ms"] > 0 and level["p50_itl_ms"] is not None
    truth = _truth(runs, api)
    for rec in (r for r in read_jsonl(runs / f"{api}.jsonl") if r["status"] == "ok"):
        assert (rec["output_source"], rec["output_tokens"]) == ("usage", OSL)
        assert len(rec["chunk_ns"]) == truth[rec["client_request_id"]]["completion_tokens"] == OSL
        assert (
            rec["reasoning_chunks"] == REASONING
        )  # the reasoning apart from the answer, which starts after it
        assert rec["first_answer_ns"] == rec["chunk_ns"][REASONING] >= rec["first_content_ns"]
        assert rec["finish_reason"] == {"responses": "max_output_tokens", "messages": "max_tokens"}[api]
    # usage carries the reasoning count where the API has a field for it (Messages has none)
    expected = REASONING if api == "responses" else None
    assert level["mean_reasoning_tokens"] == expected


def test_embeddings_are_measured_without_output_figures(runs: Path) -> None:
    level = _level(runs, "embeddings")
    for key in ("mean_output_tokens", "output_throughput", "p50_ttft_ms", "p50_itl_ms", "p50_tpot_ms"):
        assert level[key] is None, key
    assert level["request_throughput"] > 0 and level["total_token_throughput"] > 0
    assert 0 < level["p50_e2el_ms"] <= level["p99_e2el_ms"]
    for rec in (r for r in read_jsonl(runs / "embeddings.jsonl") if r["status"] == "ok"):
        assert rec["output_tokens"] is None and rec["chunk_ns"] == [] and rec["ttft_ms"] is None
    out = (runs / "embeddings.out").read_text()
    header = next(line for line in out.splitlines() if line.startswith("level"))
    assert header.split() == [
        "level", "done", "fail", "ISL", "req/s", "in", "tok/s", "lat", "p50", "lat", "p90", "lat", "p99",
        "±", "lag", "steady",
    ]  # fmt: skip
    assert "OSL" not in out and "knee:" not in out
    assert "lat p50" in out  # the progress line too


def test_the_simulators_metrics_count_every_api(runs: Path) -> None:
    truth = [r for r in read_jsonl(runs / "truth.jsonl") if r["status"] != "error"]
    assert {r["endpoint"] for r in truth} == set(RUNS)
    metrics = (runs / "metrics.txt").read_text()

    def value(name: str) -> float:
        total = 0.0
        for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", metrics, re.M):
            total += float(m.group(1))
        return total

    assert value("vllm:prompt_tokens_total") == sum(r["prompt_tokens"] for r in truth)
    assert value("vllm:generation_tokens_total") == sum(r["completion_tokens"] for r in truth)
    assert value("vllm:request_success_total") == sum(r["status"] == "ok" for r in truth)
