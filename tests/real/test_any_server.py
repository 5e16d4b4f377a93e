"""Against any real server (llama.cpp, vLLM, ...), when ``TOKENTOP_REAL_URL`` names one; skipped otherwise
(the `real` suite: `tests/real/conftest.py`).

The simulator is the ground truth for timings, but only a real tokenizer and chat template prove that the
ISL calibration works on something tokentop did not write. ../shared/realserver starts llama.cpp with Gemma 3
270M (slow on 2 cores: ~35 tok/s for one stream), so this stays at a handful of requests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.engine_helpers import bench
from tests.support.real_servers import Server

pytestmark = pytest.mark.timeout(300)


def test_isl_and_osl_are_exact_by_the_servers_usage(any_server: Server, tmp_path: Path) -> None:
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    r = bench("--url", any_server.url, "--concurrency", "1", "--requests", "6", "--isl", "200", "--osl", "32",
              "--output", str(out), "--requests-log", str(log), timeout_s=240)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (level,) = json.loads(out.read_text())["levels"]
    assert abs(level["mean_input_tokens"] - 200) <= 1.0
    assert level["mean_output_tokens"] == 32
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(r["input_source"] == r["output_source"] == "usage" for r in records)
    assert abs(sum(r["input_tokens"] for r in records) / len(records) - 200) <= 1.0
    assert "warning: level" not in r.stdout  # no length-mismatch notice
