"""tokentop against a real vLLM (0.32, the CPU build serving Gemma 3 270M: `../shared/realserver`), skipped
when none is up. On 2 shared cores it streams fifty tokens a second when idle and under one when the
machine is busy (a load of 20: TTFT 16 s), so every run here is a few requests of a few tokens, held for a
fixed time where it can be, and one run serves several checks.

What each asserts is what the simulator cannot prove: a real tokenizer's usage, the names vLLM 0.32 serves,
its scheduler's running/waiting against ``--max-num-seqs``, its TTFT parts, and its prefix cache. Another
client of the same server may add to its counters and gauges, so those are bounded from one side only."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.engine_helpers import bench, read_jsonl
from tests.support.real_servers import Server
from tui.engine.config import TargetConfig
from tui.engine.host.cache_reset import reset_prefix_cache
from tui.engine.server_metrics import ServerMetricsPoller
from tui.engine.server_metrics.kinds import MAPS, VLLM, detect_kind
from tui.engine.server_metrics.parse import parse_text
from tui.engine.server_metrics.view import read

pytestmark = pytest.mark.timeout(600)

MAX_NUM_SEQS = 16
"""`vllm_start.sh`'s default; ``TOKENTOP_VLLM_MAX_NUM_SEQS`` is not read: the test assumes it."""


def _levels(out: Path) -> list[dict[str, Any]]:
    return list(json.loads(out.read_text())["levels"])


@pytest.mark.parametrize("api", ["chat", "completions", "responses"])
def test_streams_count_osl_and_isl_by_usage(vllm: Server, api: str, tmp_path: Path) -> None:
    """Under ignore_eos vLLM streams special tokens as empty chunks: OSL is the usage's, exactly; its
    Responses API (``response.completed``'s ``usage``) too. (Its Messages API drops ``ignore_eos``: its OSL
    follows EOS, so it has no exact OSL to check.)"""
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    r = bench("--url", vllm.url, "--api", api, "--concurrency", "2", "--requests", "2",
              "--isl", "64", "--osl", "12", "--output", str(out), "--requests-log", str(log),
              timeout_s=540)  # fmt: skip
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


def _complete(vllm: Server, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One non-streamed completion's usage (ignore_eos: exactly ``max_tokens``)."""
    body = {"model": vllm.model, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True}
    with httpx.Client(timeout=900) as client:
        usage = client.post(vllm.url + "/v1/completions", json=body).json()["usage"]
    return dict(usage)


def test_running_and_waiting_against_max_num_seqs_and_ttft_in_parts(vllm: Server) -> None:
    """20 requests against --max-num-seqs 16, scraped by tokentop's poller: running tops at 16 with 4
    waiting, and once all ended the TTFT parts over the span (queue + prefill + the rest) add up to the
    server's TTFT. Direct requests, not a bench: on a busy machine a level's window closes before any ends.
    A KV cache made small for preemptions holds fewer than 16 (10 in 1,129 tokens): skipped then."""
    tokens = _kv_tokens(vllm.metrics)
    if tokens is not None and tokens < MAX_NUM_SEQS * 128:
        pytest.skip(
            f"a KV cache of {tokens} tokens runs fewer than {MAX_NUM_SEQS}: start vLLM without a block "
            "override"
        )
    with ServerMetricsPoller(vllm.url + "/v1", interval_s=0.5, history=3600) as poller:
        time.sleep(1.5)  # a scrape before the load: the span's counters start from it
        t_from = time.perf_counter_ns()
        with ThreadPoolExecutor(20) as pool:
            usages = list(pool.map(lambda i: _complete(vllm, f"request {i}: " + "word " * 16, 4), range(20)))
        time.sleep(1.5)  # a scrape after the last ended
        view = poller.latest()
        t_to = time.perf_counter_ns()
    assert all(u["completion_tokens"] == 4 for u in usages)
    points = [(r.gauges.get("running"), r.gauges.get("waiting")) for r in view.readings if r.t_ns >= t_from]
    assert max(run or 0 for run, _ in points) == MAX_NUM_SEQS, points
    assert max(wait or 0 for _, wait in points) >= 1, points
    parts = view.level_summary(t_from, t_to)["ttft_parts"]
    assert parts is not None and parts["count"] >= 20 and not parts["missing"], parts
    whole, queue, prefill = parts["server_ttft_ms"], parts["queue_ms"], parts["prefill_ms"]
    assert queue > 0 and prefill > 0  # 4 of 20 waited for a slot
    # queue + prefill make most of the whole; the rest is the API server's own (tokenising 20 prompts that
    # came at once, the hop to the engine): 1.7 s of 28 s (6 %) with the machine at a load of 20, 1.29 s of
    # 5.36 s (24 %) on a quiet one, where the engine's parts shrink and the API server's do not: under half
    assert 0 <= parts["server_other_ms"] <= 0.5 * whole, parts


def test_prefix_cache_counts_and_the_reset(vllm: Server) -> None:
    """A 256-token shared prefix: the second prompt is served from the cache, ``cached_tokens`` says how
    much and the counters' increase agrees; tokentop's reset (VLLM_SERVER_DEV_MODE=1) drops it, and a
    refusal is one line saying how to enable it."""
    if "vllm:prefix_cache_queries_total" not in vllm.metrics:
        pytest.skip("vLLM's prefix cache is off: EXTRA_ARGS=--enable-prefix-caching")
    if not isinstance(_complete(vllm, "hello", 1).get("prompt_tokens_details"), dict):
        pytest.skip("vLLM gives no cached_tokens: EXTRA_ARGS=--enable-prompt-tokens-details")
    target = TargetConfig(base_url=vllm.url + "/v1")
    outcome = reset_prefix_cache(target, VLLM)
    if not outcome.done:
        assert "VLLM_SERVER_DEV_MODE=1" in outcome.line and "\n" not in outcome.line
        pytest.skip(f"vLLM refused the reset: {outcome.line}")
    prefix = " ".join(f"shared{i}" for i in range(128))  # 256 tokens and more for Gemma's tokenizer
    before = read(parse_text(_metrics(vllm)), 0, VLLM).counters
    first = _complete(vllm, prefix + " first question", 1)
    second = _complete(vllm, prefix + " second question", 1)
    after = read(parse_text(_metrics(vllm)), 0, VLLM).counters
    assert first["prompt_tokens_details"]["cached_tokens"] == 0  # cold after the reset
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert cached >= 240, second  # the shared prefix, in whole 16-token blocks
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    # the counters agree (at least: another client of the same server adds its own)
    assert hits >= cached and queries >= first["prompt_tokens"] + second["prompt_tokens"], (hits, queries)
    assert reset_prefix_cache(target, VLLM).done
    third = _complete(vllm, prefix + " third question", 1)
    assert third["prompt_tokens_details"]["cached_tokens"] == 0  # dropped again


def _metrics(vllm: Server) -> str:
    with httpx.Client(timeout=30) as client:
        return client.get(vllm.url + "/metrics").text


def _kv_tokens(metrics: str) -> int | None:
    """The KV cache's size in tokens, from ``vllm:cache_config_info``'s ``kv_cache_size_tokens`` (not its
    blocks times their size: Gemma 3's sliding-window layers make 64 blocks of 128 hold 1,129 tokens)."""
    for line in metrics.splitlines():
        if line.startswith("vllm:cache_config_info{"):
            size = line.partition('kv_cache_size_tokens="')[2].partition('"')[0]
            return int(size) if size.isdigit() else None
    return None


@pytest.mark.timeout(1200)
def test_preemptions_are_shown_and_saved_per_level(vllm: Server, tmp_path: Path) -> None:
    """Answers that outgrow the KV cache make vLLM preempt (and later recompute) some: the level saves
    the preemptions its server counted (``server.preemptions``, ``server.preemptions_per_s``). Needs a small
    cache: ``MAX_MODEL_LEN=512 EXTRA_ARGS=--num-gpu-blocks-override 64`` (1,129 tokens; ``KV_GIB`` takes
    whole GiB only, and 24 blocks cannot hold a 2,048-token request). vLLM 0.32 counts a preemption only
    when the preempted request runs again (its events come with its next output), so the run lasts until
    the preempted ones have resumed: minutes on 2 busy cores."""
    tokens = _kv_tokens(vllm.metrics)
    if tokens is None or tokens > 4096:
        pytest.skip(f"a KV cache of {tokens} tokens: start vLLM with --num-gpu-blocks-override 64")
    users, isl, osl = 4, 3 * tokens // 16, 2 * tokens // 16  # the prompts fit (3/4), the answers do not
    out = tmp_path / "results.json"
    r = bench("--url", vllm.url, "--concurrency", str(users), "--requests", str(users), "--isl", str(isl),
              "--osl", str(osl), "--timeout", "900", "--no-isl-probe", "--output", str(out),
              timeout_s=1100)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (level,) = _levels(out)
    server = level["server"]
    assert server["preemptions"] >= 1 and server["preemptions_per_s"] > 0, server
    assert level["completed"] >= users and level["mean_output_tokens"] == osl
