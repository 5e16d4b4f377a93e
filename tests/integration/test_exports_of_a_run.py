"""The exports of a real bench run over the simulator: AIPerf's per-request records from its requests log
(the window's population in the profiling phase, on the wall clock) and llm-d's reports, each valid."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import jsonschema
import orjson
import pytest

from tests.support.engine_helpers import tokentop
from tests.unit.test_aiperf_export import AIPERF_RECORD_SCHEMA
from tui.engine.results.files import read_results

pytestmark = pytest.mark.timeout(120)
SIM = ["--sim-profile", "tiny-cpu", "--sim-time-scale", "10", "--isl", "32", "--osl", "16"]


def _tokentop(*args: str) -> subprocess.CompletedProcess[str]:
    return tokentop(*args, timeout_s=100)


def test_aiperf_records_of_a_run_are_its_requests_on_the_wall_clock(tmp_path: Path) -> None:
    out, log = tmp_path / "run.json", tmp_path / "requests.jsonl"
    before_ns = time.time_ns()
    r = _tokentop("bench", "--concurrency", "1,2", "--requests", "8", *SIM, "--output", str(out),
                  "--requests-log", str(log), "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    after_ns = time.time_ns()
    results = read_results(out)
    assert results.clock is not None
    profile = tmp_path / "profile_export.jsonl"
    r = _tokentop("export", str(out), "--to", "aiperf", "--requests-log", str(log), "--out", str(profile))
    assert r.returncode == 0, r.stderr
    records = [orjson.loads(line) for line in profile.read_bytes().splitlines()]
    assert len(records) == len(log.read_bytes().splitlines())  # every request of the run, once
    for rec in records:
        jsonschema.validate(rec, AIPERF_RECORD_SCHEMA)
        meta = rec["metadata"]
        assert before_ns <= meta["request_start_ns"] <= meta["request_end_ns"] <= after_ns
    # the profiling phase is each level's window: as many requests as the level's statistics describe
    level_of = {
        rec["client_request_id"]: rec["level"] for rec in map(orjson.loads, log.read_bytes().splitlines())
    }
    by_level: dict[int, int] = {}
    for rec in records:
        if rec["metadata"]["benchmark_phase"] == "profiling":
            level = level_of[rec["metadata"]["x_request_id"]]
            by_level[level] = by_level.get(level, 0) + 1
    assert by_level == {lv.level_id: lv.completed + lv.failed for lv in results.levels}
    r = _tokentop("export", str(out), "--to", "llmd", "--out", str(tmp_path / "llmd"))
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "llmd").glob("*.json"))) == len(results.levels)
