"""tokentop against a real vLLM (0.32, the CPU build serving Gemma 3 270M: `../shared/realserver`), skipped
when none is up. On 2 shared cores it streams a few to fifty tokens a second, so every run here is a few
requests of a few tokens, and one run serves several checks.

What each asserts is what the simulator cannot prove: a real tokenizer's usage, the names vLLM 0.32 serves,
its scheduler's running/waiting against ``--max-num-seqs``, its TTFT parts, and its prefix cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.engine_helpers import bench, read_jsonl
from tests.support.real_servers import Server
from tui.engine.server_metrics.kinds import MAPS, VLLM, detect_kind
from tui.engine.server_metrics.parse import parse_text
from tui.engine.server_metrics.view import read

pytestmark = pytest.mark.timeout(600)

MAX_NUM_SEQS = 16
"""`vllm_start.sh`'s default; ``TOKENTOP_VLLM_MAX_NUM_SEQS`` is not read: the test assumes it."""


def _levels(out: Path) -> list[dict[str, Any]]:
    return list(json.loads(out.read_text())["levels"])


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_streams_count_osl_and_isl_by_usage(vllm: Server, endpoint: str, tmp_path: Path) -> None:
    """Under ignore_eos vLLM streams special tokens as empty chunks: OSL is the usage's, exactly."""
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    r = bench("--url", vllm.url, "--endpoint", endpoint, "--concurrency", "2", "--requests", "4",
              "--isl", "64", "--osl", "12", "--output", str(out), "--requests-log", str(log),
              timeout_s=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (level,) = _levels(out)
    assert level["mean_output_tokens"] == 12
    assert abs(level["mean_input_tokens"] - 64) <= 1.0
    records = read_jsonl(log)
    assert records and all(x["status"] == "ok" for x in records)
    assert all(x["input_source"] == x["output_source"] == "usage" for x in records)
    assert "warning: level" not in r.stdout  # no length-mismatch notice


def test_every_vllm_name_tokentop_reads_is_served(vllm: Server) -> None:
    """Each gauge, counter and histogram of tokentop's vLLM map is in 0.32's /metrics under the name it
    reads (the spec-decode counters only with a draft model), and its ``*_created`` gauges do not stand
    in for the counters they belong to."""
    with httpx.Client(timeout=10) as client:
        text = client.get(vllm.url + "/metrics").text
    families = parse_text(text)
    assert detect_kind(list(families)) == VLLM
    reading = read(families, 0, VLLM)
    vllm_map = MAPS[VLLM]
    assert set(vllm_map.gauges) <= set(reading.gauges), reading.gauges
    wanted = [
        n for r in vllm_map.rates.values() for n in (*r.numerator, *r.denominator) if "spec_decode" not in n
    ]
    missing = [n for n in wanted if n not in reading.counters]
    assert not missing, f"counters tokentop reads that vLLM 0.32 does not serve: {missing}"
    assert set(vllm_map.histograms) <= set(reading.histograms), sorted(reading.histograms)
    assert "vllm:prompt_tokens_created" in text  # a gauge family of its own ...
    created = [line for line in text.splitlines() if line.startswith("vllm:prompt_tokens_created")]
    total = [line for line in text.splitlines() if line.startswith("vllm:prompt_tokens_total")]
    assert reading.counters["vllm:prompt_tokens_total"] == sum(float(x.split()[-1]) for x in total)
    assert created and float(created[0].split()[-1]) > 1e9  # ... a Unix time, never read as the count


def test_running_and_waiting_against_max_num_seqs_and_ttft_in_parts(vllm: Server, tmp_path: Path) -> None:
    """20 users against --max-num-seqs 16: the server pane's running tops at 16 with the rest waiting, and
    the level's TTFT parts (queue + prefill + the rest) add up to the server's TTFT."""
    out, scrapes = tmp_path / "results.json", tmp_path / "scrapes.jsonl"
    r = bench("--url", vllm.url, "--concurrency", "20", "--requests", "20", "--isl", "32", "--osl", "16",
              "--output", str(out), "--server-metrics-log", str(scrapes),
              timeout_s=400)  # fmt: skip
    assert r.returncode == 0, r.stderr
    current = [s["current"] for s in read_jsonl(scrapes) if s.get("status") == "ok"]
    running = [c["running"] for c in current if c.get("running") is not None]
    waiting = [c["waiting"] for c in current if c.get("waiting") is not None]
    assert max(running) == MAX_NUM_SEQS, running
    assert max(waiting) >= 1 and max(r + w for r, w in zip(running, waiting, strict=True)) <= 20
    (level,) = _levels(out)
    parts = level["server"]["ttft_parts"]
    assert parts is not None and not parts["missing"], parts
    whole, queue, prefill = parts["server_ttft_ms"], parts["queue_ms"], parts["prefill_ms"]
    assert queue > 0 and prefill > 0  # 4 of 20 waited for a slot
    assert parts["server_other_ms"] == pytest.approx(whole - queue - prefill)
    assert parts["server_other_ms"] >= -0.05 * whole, parts  # the parts do not exceed the whole
    assert parts["client_ttft_ms"] >= 0.9 * whole, parts  # the client sees the server's TTFT and more


def _details(vllm: Server) -> bool:
    """vLLM gives ``usage.prompt_tokens_details.cached_tokens`` (``--enable-prompt-tokens-details``)."""
    body = {"model": vllm.model, "prompt": "hello", "max_tokens": 1}
    with httpx.Client(timeout=60) as client:
        usage = client.post(vllm.url + "/v1/completions", json=body).json()["usage"]
    return isinstance(usage.get("prompt_tokens_details"), dict)


def test_prefix_cache_hit_rate_per_level_and_the_reset(vllm: Server, tmp_path: Path) -> None:
    """A shared prefix with a reset before each level: the first request of each level hits nothing, the
    rest hit the prefix, and the level's hit rate by ``cached_tokens`` and by the server's counters agree.
    Without VLLM_SERVER_DEV_MODE=1 the reset is refused in one line, which the test checks instead."""
    if not _details(vllm):
        pytest.skip("vLLM gives no cached_tokens: start it with EXTRA_ARGS='--enable-prefix-caching "
                    "--enable-prompt-tokens-details'")  # fmt: skip
    if "vllm:prefix_cache_queries_total" not in vllm.metrics:
        pytest.skip("vLLM's prefix cache is off: EXTRA_ARGS=--enable-prefix-caching")
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    r = bench("--url", vllm.url, "--concurrency", "1,1", "--requests", "4", "--isl", "16", "--osl", "2",
              "--shared-prefix", "256", "--reset-cache", "--reset-cache-between-levels",
              "--output", str(out), "--requests-log", str(log), timeout_s=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    if "refused to drop its prefix cache" in r.stdout:
        assert "VLLM_SERVER_DEV_MODE=1" in r.stdout
        pytest.skip("vLLM refused the reset (said in one line): start it with VLLM_SERVER_DEV_MODE=1")
    assert "prefix cache dropped (POST /reset_prefix_cache)" in r.stderr, r.stderr
    for level_id in (1, 2):
        records = sorted(
            (x for x in read_jsonl(log) if x["level"] == level_id), key=lambda x: x["send_start_ns"]
        )
        assert records[0]["cached_tokens"] < 64, records[0]  # cold: at most the probe's template blocks
        assert all(x["cached_tokens"] >= 256 - 16 for x in records[1:]), [x["cached_tokens"] for x in records]
    for level in _levels(out):
        by_usage, by_counters = level["prefix_cache_hit_rate"], level["server"]["prefix_cache_hit_rate"]
        assert by_usage > 0.5 and by_counters is not None and abs(by_usage - by_counters) < 0.2, level
