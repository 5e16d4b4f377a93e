"""tokentop against a real llama.cpp `llama-server` (Gemma 3 270M: `../shared/realserver/start.sh`, with
``--metrics``; the cache reset needs ``--slot-save-path DIR`` too), skipped when none is up. A handful of
short requests: slow on 2 cores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.engine_helpers import bench, read_jsonl
from tests.support.real_servers import Server
from tui.engine.config import TargetConfig
from tui.engine.host.cache_reset import reset_prefix_cache
from tui.engine.server_metrics.kinds import LLAMACPP, MAPS, detect_kind
from tui.engine.server_metrics.parse import parse_text
from tui.engine.server_metrics.view import read

pytestmark = pytest.mark.timeout(300)


def test_streams_by_usage_and_its_running_waiting_names(llamacpp: Server, tmp_path: Path) -> None:
    """Its stream (a role chunk with null content, a last usage chunk with timings) counts OSL by usage;
    its /metrics gives running and waiting under the names tokentop reads."""
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    r = bench("--url", llamacpp.url, "--concurrency", "2", "--requests", "4", "--isl", "64", "--osl", "12",
              "--output", str(out), "--requests-log", str(log), timeout_s=240)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (level,) = json.loads(out.read_text())["levels"]
    assert level["mean_output_tokens"] == 12
    assert all(x["output_source"] == "usage" for x in read_jsonl(log))
    families = parse_text(llamacpp.metrics)
    assert detect_kind(list(families)) == LLAMACPP
    assert {"running", "waiting"} <= set(read(families, 0, LLAMACPP).gauges) <= set(MAPS[LLAMACPP].gauges)


def test_the_cache_reset_erases_every_slot(llamacpp: Server) -> None:
    outcome = reset_prefix_cache(TargetConfig(base_url=llamacpp.url + "/v1"), LLAMACPP)
    if not outcome.done and "refused" in outcome.line:
        pytest.skip(f"llama.cpp takes no slot action (start it with --slot-save-path): {outcome.line}")
    assert outcome.done and "/slots" in outcome.line, outcome


@pytest.mark.parametrize("api", ["completions", "responses", "messages"])
def test_each_api_counts_isl_and_osl_by_the_servers_usage(llamacpp: Server, tmp_path: Path, api: str) -> None:
    """The Responses and Messages streams (and completions') give the same exact counts as chat's."""
    out = tmp_path / "results.json"
    r = bench("--url", llamacpp.url, "--api", api, "--concurrency", "2", "--requests", "4", "--isl", "64",
              "--osl", "12", "--output", str(out), "--no-record", timeout_s=240)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (level,) = json.loads(out.read_text())["levels"]
    assert level["failed"] == 0 and level["completed"] >= 4
    assert level["mean_output_tokens"] == 12 and level["mean_input_tokens"] == 64
