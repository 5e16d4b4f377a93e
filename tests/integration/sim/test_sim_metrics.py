"""The simulator's `/metrics` against what it knows: counters, histograms, gauges, the state log, 404.

Parsed here by hand (a few lines per sample), not with the face's scraper: the simulator's tests must not
lean on the code the simulator is used to test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from tests.support.sim_client import CHAT_TEMPLATE_TOKENS, call, chat_body
from tui.sim.launch import SimServer
from tui.sim.perf_model import PROFILES
from tui.sim.prometheus import ITL_EDGES_S, REQUEST_LATENCY_EDGES_S, TTFT_EDGES_S


def samples(text: str) -> dict[str, float]:
    """`name{labels}` -> value for every sample line."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


async def scrape(port: int) -> dict[str, float]:
    reply = await call(port, "GET", "/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/plain")
    return samples(reply.body.decode())


def histogram(s: dict[str, float], name: str, model: str, edges: tuple[float, ...]) -> list[float]:
    """The cumulative bucket counts of one histogram, checked for shape (monotone, +Inf == count)."""
    lab = f'model_name="{model}"'
    counts = [s[f'{name}_bucket{{{lab},le="{edge}"}}'] for edge in edges]
    counts.append(s[f'{name}_bucket{{{lab},le="+Inf"}}'])
    assert counts == sorted(counts), counts
    assert counts[-1] == s[f"{name}_count{{{lab}}}"]
    return counts


async def test_counters_and_histograms_match_the_requests_served(tmp_path: Path) -> None:
    truth_log = tmp_path / "truth.jsonl"
    model = PROFILES["small-gpu"].model
    lab = f'{{model_name="{model}"}}'
    n, osl, words = 6, 12, 20
    with SimServer("small-gpu", time_scale=20, truth_log=truth_log) as sim:
        before = await scrape(sim.port)
        assert before[f"vllm:num_requests_running{lab}"] == 0
        assert before[f"vllm:generation_tokens_total{lab}"] == 0
        replies = await asyncio.gather(
            *(call(sim.port, "POST", "/v1/chat/completions", chat_body(osl, words=words)) for _ in range(n))
        )
        assert all(r.status == 200 and r.done for r in replies)
        s = await scrape(sim.port)
    assert s[f"vllm:generation_tokens_total{lab}"] == n * osl
    assert s[f"vllm:prompt_tokens_total{lab}"] == n * (words + CHAT_TEMPLATE_TOKENS)
    assert s[f'vllm:request_success_total{{finished_reason="length",model_name="{model}"}}'] == n
    assert s[f"vllm:num_requests_running{lab}"] == 0 and s[f"vllm:num_requests_waiting{lab}"] == 0
    assert s[f"vllm:kv_cache_usage_perc{lab}"] == 0.0
    assert histogram(s, "vllm:time_to_first_token_seconds", model, TTFT_EDGES_S)[-1] == n
    assert histogram(s, "vllm:request_queue_time_seconds", model, REQUEST_LATENCY_EDGES_S)[-1] == n
    assert histogram(s, "vllm:e2e_request_latency_seconds", model, REQUEST_LATENCY_EDGES_S)[-1] == n
    assert histogram(s, "vllm:inter_token_latency_seconds", model, ITL_EDGES_S)[-1] == n * (osl - 1)
    # The TTFT the histogram summed is the truth log's, stamp for stamp.
    truth = [orjson.loads(line) for line in truth_log.read_bytes().splitlines()]
    ttft_sum_s = sum((t["first_token_ns"] - t["arrival_ns"]) / 1e9 for t in truth)
    assert abs(s[f"vllm:time_to_first_token_seconds_sum{lab}"] - ttft_sum_s) < 1e-6


async def test_gauges_under_saturation_and_the_state_log(tmp_path: Path) -> None:
    """8 streams on 4 slots: 4 run, 4 wait, KV is held; the state log saw the same."""
    state_log = tmp_path / "state.jsonl"
    profile = PROFILES["tiny-cpu"]
    lab = f'{{model_name="{profile.model}"}}'
    with SimServer("tiny-cpu", time_scale=5, state_log=state_log) as sim:
        tasks = [
            asyncio.ensure_future(call(sim.port, "POST", "/v1/chat/completions", chat_body(60, words=10)))
            for _ in range(8)
        ]
        for _ in range(200):  # bounded: until all 8 arrived and the first 4 were admitted
            s = await scrape(sim.port)
            if s[f"vllm:num_requests_waiting{lab}"] == 4:
                break
            await asyncio.sleep(0.01)
        assert s[f"vllm:num_requests_running{lab}"] == profile.max_num_seqs == 4
        assert s[f"vllm:num_requests_waiting{lab}"] == 4
        assert 0 < s[f"vllm:kv_cache_usage_perc{lab}"] <= 4 * 70 / profile.kv_cache_tokens
        replies = await asyncio.gather(*tasks)
        assert all(r.status == 200 for r in replies)
    states = [orjson.loads(line) for line in state_log.read_bytes().splitlines()]
    # Up to 8 may wait for an instant: arrivals can all land before the engine's first step admits any.
    assert max(st["running"] for st in states) == 4 and 4 <= max(st["waiting"] for st in states) <= 8
    assert states[-1]["running"] == states[-1]["waiting"] == states[-1]["kv_used"] == 0
    assert [st["t_ns"] for st in states] == sorted(st["t_ns"] for st in states)


async def test_preemptions_are_counted_when_the_kv_cache_runs_out() -> None:
    model = PROFILES["tiny-cpu"].model
    lab = f'{{model_name="{model}"}}'
    with SimServer("tiny-cpu", time_scale=20, extra_args=["--kv-tokens", "200"]) as sim:
        replies = await asyncio.gather(
            *(call(sim.port, "POST", "/v1/chat/completions", chat_body(80, words=20)) for _ in range(4))
        )
        assert all(r.status == 200 and r.done for r in replies)
        s = await scrape(sim.port)
    assert s[f"vllm:num_preemptions_total{lab}"] > 0
    assert s[f"vllm:generation_tokens_total{lab}"] == 4 * 80  # a recompute is prefill, not generation


async def test_no_metrics_answers_404() -> None:
    with SimServer("tiny-cpu", metrics=False) as sim:
        reply = await call(sim.port, "GET", "/metrics")
        assert reply.status == 404
        assert (await call(sim.port, "GET", "/v1/models")).status == 200


async def test_ttft_parts_add_up_to_the_ttft_in_the_truth_log(tmp_path: Path) -> None:
    """Per request queue (arrival -> admission) + prefill (admission -> first token) is its TTFT: the
    histograms' sums are the truth log's, and decode + inference are there too."""
    truth_log = tmp_path / "truth.jsonl"
    model = PROFILES["tiny-cpu"].model
    lab = f'{{model_name="{model}"}}'
    n, osl = 8, 6  # 8 on 4 slots: half of them wait
    with SimServer("tiny-cpu", time_scale=20, truth_log=truth_log) as sim:
        replies = await asyncio.gather(
            *(call(sim.port, "POST", "/v1/chat/completions", chat_body(osl, words=10)) for _ in range(n))
        )
        assert all(r.status == 200 and r.done for r in replies)
        s = await scrape(sim.port)
    for name in ("prefill", "decode", "inference"):
        assert histogram(s, f"vllm:request_{name}_time_seconds", model, REQUEST_LATENCY_EDGES_S)[-1] == n
    truth = [orjson.loads(line) for line in truth_log.read_bytes().splitlines()]
    queue_s = sum((t["admitted_ns"] - t["arrival_ns"]) / 1e9 for t in truth)
    prefill_s = sum((t["first_token_ns"] - t["admitted_ns"]) / 1e9 for t in truth)
    assert abs(s[f"vllm:request_queue_time_seconds_sum{lab}"] - queue_s) < 1e-6
    assert abs(s[f"vllm:request_prefill_time_seconds_sum{lab}"] - prefill_s) < 1e-6
    ttft_sum = s[f"vllm:time_to_first_token_seconds_sum{lab}"]
    assert abs(ttft_sum - queue_s - prefill_s) < 1e-6
    assert queue_s > 0  # four waited for a slot


async def test_a_gpu_profile_serves_dcgm_fields_memory_bound_while_decoding() -> None:
    """small-gpu decoding a batch: DRAM busy far more than SMs (a decode step reads every weight for a few
    tokens of arithmetic); a CPU profile serves no DCGM field at all."""
    with SimServer("small-gpu", time_scale=1) as sim:
        tasks = [
            asyncio.ensure_future(call(sim.port, "POST", "/v1/chat/completions", chat_body(400, words=10)))
            for _ in range(8)
        ]
        s: dict[str, float] = {}
        for _ in range(100):  # bounded: until a second of decoding is in the DCGM window
            await asyncio.sleep(0.05)
            s = await scrape(sim.port)
            if (
                s[
                    'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-sim-0",device="nvidia0",modelName="sim-llama-3-8b"}'
                ]
                > 50
            ):
                break
        for task in tasks:
            task.cancel()
    gpu = {k.split("{")[0]: v for k, v in s.items() if k.startswith("DCGM_")}
    assert gpu["DCGM_FI_DEV_GPU_UTIL"] > 50
    assert gpu["DCGM_FI_PROF_DRAM_ACTIVE"] > 0.5 > gpu["DCGM_FI_PROF_SM_ACTIVE"]
    assert gpu["DCGM_FI_DEV_FB_USED"] + gpu["DCGM_FI_DEV_FB_FREE"] == PROFILES["small-gpu"].gpu_fb_mib
    with SimServer("tiny-cpu", time_scale=5) as sim:
        assert not any(k.startswith("DCGM_") for k in await scrape(sim.port))
