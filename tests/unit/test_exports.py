"""The exports: vLLM-shaped files (vLLM's keys, tokentop's values) and the level table as CSV."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from tests.app import frozen
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.exports import levels_csv, vllm_level, write_exports
from tui.engine.host.results import ClientSummary, RunInfo, build_results, write_results
from tui.engine.host.results_file import read_results

# Read off vllm/benchmarks/serve.py (main_async's result_json, benchmark()'s result, process_one_metric's
# f"mean_{m}_ms", f"median_{m}_ms", f"std_{m}_ms", f"p{p}_{m}_ms"), not from tui.engine.host.exports.
VLLM_KEYS = [
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency",
    "duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
    "request_goodput", "output_throughput", "total_token_throughput",
]  # fmt: skip
VLLM_METRIC_KEYS = [
    f"{stat}_{metric}_ms"
    for metric in ("ttft", "tpot", "itl", "e2el")
    for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99")
]


def _results(*, interrupted: str | None = None, rate: bool = False) -> dict[str, Any]:
    snap = frozen.snapshot()
    levels = snap.levels
    if rate:
        levels = tuple(replace(lv, mode="rate", value=2.0 * (i + 1)) for i, lv in enumerate(levels))
    load = LoadTarget(mode="rate", rate=2.0, max_concurrency=64) if rate else LoadTarget(concurrency=8)
    info = RunInfo.of(
        TargetConfig(base_url="http://127.0.0.1:8000/v1", api_key="sk-never-written"),
        WorkloadConfig(isl=64, osl=128),
        load,
        options=EngineOptions(slo_ttft_ms=500.0),
        workers=1,
        model="org/sim-llama-8b",
        started_at_s=1_700_000_000.0,
    )
    views = [(lv, {"cancelled": 0}) for lv in levels]
    return build_results(info, replace(snap, levels=levels), views, ClientSummary(1.0, 0.2, saturated=False),
                         interrupted=interrupted)  # fmt: skip


def test_vllm_files_have_vllms_keys_and_tokentops_values(tmp_path: Path) -> None:
    results = _results(interrupted="quit")
    paths = write_exports(results, vllm_dir=tmp_path / "vllm")
    assert len(paths) == len(results["levels"]) > 1
    assert len({p.name for p in paths}) == len(paths)
    for path, level in zip(paths, results["levels"], strict=True):
        record = orjson.loads(path.read_bytes())
        # vLLM's keys, in vLLM's order, then ours (prefixed, so no vLLM key is shadowed)
        ours = [k for k in record if k.startswith("tokentop_")]
        assert list(record)[: len(VLLM_KEYS)] == VLLM_KEYS
        assert set(record) == set(VLLM_KEYS) | set(VLLM_METRIC_KEYS) | set(ours)
        for key in VLLM_KEYS[10:] + VLLM_METRIC_KEYS:
            # request_goodput: None without SLOs, as vLLM writes it without --goodput
            assert record[key] == (level[key] if key != "request_goodput" else level.get(key)), key
        assert record["num_prompts"] == level["completed"] + level["failed"]
        assert record["request_rate"] == "inf" and record["max_concurrency"] == level["concurrency"]
        assert record["burstiness"] == 1.0
        assert record["backend"] == record["endpoint_type"] == "openai-chat"
        assert record["model_id"] == record["tokenizer_id"] == "org/sim-llama-8b"
        assert len(record["date"]) == len("20231114-221320") and record["date"][8] == "-"
        assert record["tokentop_level_id"] == level["level_id"] and record["tokentop_interrupted"] is True
        assert "sk-never-written" not in path.read_text()
        assert path.name.startswith("tokentop-infqps-concurrency") and "sim-llama-8b" in path.name


def test_interrupted_and_too_short_read_back(tmp_path: Path) -> None:
    results = _results(interrupted="SIGINT")
    results["levels"][0].update(too_short=True, output_throughput=None)
    res = read_results(write_results(results, tmp_path / "results.json"))
    assert res.interrupted_by == "SIGINT"
    assert res.levels[0].too_short and math.isnan(res.levels[0].output_tps)
    assert not res.levels[1].too_short


def test_vllm_rate_levels_carry_their_rate_and_burstiness() -> None:
    results = _results(rate=True)
    for level in results["levels"]:
        record = vllm_level(results, level)
        assert record["request_rate"] == level["request_rate"]
        assert record["burstiness"] == 1.0  # Poisson: vLLM's default
        assert record["max_concurrency"] == 64
    constant = dict(results["levels"][0], arrival="constant")
    assert vllm_level(results, constant)["burstiness"] is None


def test_a_too_short_level_exports_null_rates() -> None:
    results = _results()
    level = dict(results["levels"][0], request_throughput=None, output_throughput=None, too_short=True)
    record = vllm_level(results, level)
    assert record["request_throughput"] is None and record["output_throughput"] is None
    assert record["tokentop_too_short"] is True
    (row,) = csv.DictReader(io.StringIO(levels_csv({**results, "levels": [level]})))
    assert row["output_throughput"] == "" and row["too_short"] == "true"


def test_csv_is_the_level_table(tmp_path: Path) -> None:
    results = _results()
    (path,) = write_exports(results, csv_path=tmp_path / "levels.csv")
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert len(rows) == len(results["levels"])
    header = list(rows[0])
    level_keys = [k for k in results["levels"][0] if k not in ("client", "errors")]
    assert [k for k in header if k in level_keys] == level_keys
    assert "client.max_cpu_share" in header and "errors" in header
    for row, level in zip(rows, results["levels"], strict=True):
        assert int(row["level_id"]) == level["level_id"] and int(row["concurrency"]) == level["concurrency"]
        for key in ("output_throughput", "p99_ttft_ms", "duration"):
            assert float(row[key]) == level[key]
        assert orjson.loads(row["errors"]) == level["errors"]


# --- prefix-cache hit rate, histograms, the endpoint path ---------------------------


def test_vllm_files_carry_the_prefix_cache_hit_rate_under_tokentop_keys() -> None:
    results = _results()
    level = dict(results["levels"][0], cached_prompt_tokens=2048, prefix_cache_hit_rate=0.8)
    record = vllm_level(results, level)
    assert record["tokentop_cached_prompt_tokens"] == 2048 and record["tokentop_prefix_cache_hit_rate"] == 0.8
    # vLLM's serve.py has no such key: nothing outside tokentop_ besides vLLM's own
    assert {k for k in record if not k.startswith("tokentop_")} == set(VLLM_KEYS) | set(VLLM_METRIC_KEYS)
    unreported = vllm_level(results, dict(level, cached_prompt_tokens=None, prefix_cache_hit_rate=None))
    assert unreported["tokentop_prefix_cache_hit_rate"] is None


def test_csv_leaves_the_histograms_to_the_json() -> None:
    results = _results()
    histogram = {"ttft": {"edges_ms": [1.0, 10.0], "counts": [3]}}
    levels = [dict(level, histograms=histogram) for level in results["levels"]]
    rows = list(csv.DictReader(io.StringIO(levels_csv({**results, "levels": levels}))))
    assert rows and not [k for k in rows[0] if k.startswith("histograms")]
    assert "p99_ttft_ms" in rows[0]


def test_the_results_record_a_custom_endpoint_path_but_never_the_key() -> None:
    key = "sk-path-secret-123"
    target = TargetConfig(
        base_url="http://127.0.0.1:8000", api_key=key, endpoint_path=f"/gw/{key}/chat?api-key={key}&v=2"
    )
    info = RunInfo.of(
        target, WorkloadConfig(), LoadTarget(concurrency=1), options=EngineOptions(), workers=1, model="m",
        started_at_s=0.0,
    )  # fmt: skip
    results = build_results(info, frozen.snapshot(), [], ClientSummary(1.0, 0.2, saturated=False))
    assert results["config"]["endpoint_path"] == "/gw/***/chat?api-key=hidden&v=hidden"
    assert key not in orjson.dumps(results).decode()
    assert _results()["config"]["endpoint_path"] is None  # the flavour's own path
