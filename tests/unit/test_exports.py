"""The exports: vLLM-shaped files (vLLM's keys, tokentop's values) and the level table as CSV."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import orjson

from tests.support import frozen
from tests.support.engine_helpers import tokentop
from tests.unit.results_data import frozen_results
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.config_record import run_info
from tui.engine.results.build import ClientSummary, build_results
from tui.engine.results.csv import levels_csv
from tui.engine.results.exports import write_exports
from tui.engine.results.files import read_results, to_json, write_results
from tui.engine.results.model import Histogram, Histograms, Results
from tui.engine.results.vllm import append_vllm_results, vllm_appended, vllm_level

# Read off vllm/benchmarks/serve.py (main_async's result_json, benchmark()'s result, process_one_metric's
# f"mean_{m}_ms", f"median_{m}_ms", f"std_{m}_ms", f"p{p}_{m}_ms"), not from tui.engine.results.vllm.
VLLM_KEYS = [
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency",
    "duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
    "request_goodput", "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
    "max_concurrent_requests",
]  # fmt: skip
VLLM_METRIC_KEYS = [
    f"{stat}_{metric}_ms"
    for metric in ("ttft", "tpot", "itl", "e2el")
    for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99")
]


def _results(*, interrupted: str | None = None, rate: bool = False) -> Results:
    return frozen_results(interrupted=interrupted, rate=rate)


def test_vllm_files_have_vllms_keys_and_tokentops_values(tmp_path: Path) -> None:
    results = _results(interrupted="quit")
    paths = write_exports(results, vllm_dir=tmp_path / "vllm")
    assert len(paths) == len(results.levels) > 1
    assert len({p.name for p in paths}) == len(paths)
    for path, level in zip(paths, to_json(results)["levels"], strict=True):
        record = orjson.loads(path.read_bytes())
        # vLLM's keys, in vLLM's order, then ours (prefixed, so no vLLM key is shadowed)
        ours = [k for k in record if k.startswith("tokentop_")]
        assert list(record)[: len(VLLM_KEYS)] == VLLM_KEYS
        assert set(record) == set(VLLM_KEYS) | set(VLLM_METRIC_KEYS) | set(ours)
        for key in VLLM_KEYS[10:] + VLLM_METRIC_KEYS:
            # request_goodput: None without SLOs, as vLLM writes it without --goodput; the peaks None
            # where the level had no such figure
            assert record[key] == level.get(key), key
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
    first = replace(results.levels[0], too_short=True, output_throughput=None)
    results = replace(results, levels=(first, *results.levels[1:]))
    res = read_results(write_results(results, tmp_path / "results.json"))
    assert res.interrupted_by == "SIGINT"
    assert res.levels[0].too_short and res.levels[0].output_throughput is None
    assert not res.levels[1].too_short


def test_vllm_rate_levels_carry_their_rate_and_burstiness() -> None:
    results = _results(rate=True)
    for level in results.levels:
        record = vllm_level(results, level)
        assert record["request_rate"] == level.request_rate
        assert record["burstiness"] == 1.0  # Poisson: vLLM's default
        assert record["max_concurrency"] == 64
    constant = replace(results.levels[0], arrival="constant")
    assert vllm_level(results, constant)["burstiness"] is None


def test_a_too_short_level_exports_null_rates() -> None:
    results = _results()
    level = replace(results.levels[0], request_throughput=None, output_throughput=None, too_short=True)
    record = vllm_level(results, level)
    assert record["request_throughput"] is None and record["output_throughput"] is None
    assert record["tokentop_too_short"] is True
    (row,) = csv.DictReader(io.StringIO(levels_csv(replace(results, levels=(level,)))))
    assert row["output_throughput"] == "" and row["too_short"] == "true"


def test_csv_is_the_level_table(tmp_path: Path) -> None:
    results = _results()
    (path,) = write_exports(results, csv_path=tmp_path / "levels.csv")
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    levels = to_json(results)["levels"]
    assert len(rows) == len(levels)
    header = list(rows[0])
    nested = [k for k, v in levels[0].items() if isinstance(v, dict) and k != "errors"]
    level_keys = [k for k in levels[0] if k not in nested and k != "histograms"]
    assert [k for k in header if k in level_keys] == level_keys
    for key in nested:  # spread to parent.child columns
        assert any(column.startswith(f"{key}.") for column in header), key
    assert "client.max_cpu_share" in header and "errors" in header
    for row, level in zip(rows, levels, strict=True):
        assert int(row["level_id"]) == level["level_id"] and int(row["concurrency"]) == level["concurrency"]
        for key in ("output_throughput", "p99_ttft_ms", "duration"):
            assert float(row[key]) == level[key]
        assert orjson.loads(row["errors"]) == level["errors"]


# --- prefix-cache hit rate, histograms, the endpoint path ---------------------------


def test_vllm_files_carry_the_prefix_cache_hit_rate_under_tokentop_keys() -> None:
    results = _results()
    level = replace(results.levels[0], cached_prompt_tokens=2048, prefix_cache_hit_rate=0.8)
    record = vllm_level(results, level)
    assert record["tokentop_cached_prompt_tokens"] == 2048 and record["tokentop_prefix_cache_hit_rate"] == 0.8
    # vLLM's serve.py has no such key: nothing outside tokentop_ besides vLLM's own
    assert {k for k in record if not k.startswith("tokentop_")} == set(VLLM_KEYS) | set(VLLM_METRIC_KEYS)
    unreported = vllm_level(results, replace(level, cached_prompt_tokens=None, prefix_cache_hit_rate=None))
    assert unreported["tokentop_prefix_cache_hit_rate"] is None


def test_csv_leaves_the_histograms_to_the_json() -> None:
    results = _results()
    one = Histogram(edges_ms=(1.0, 10.0), counts=(3,))
    histograms = Histograms(ttft=one, e2el=one, itl=one)
    levels = tuple(replace(level, histograms=histograms) for level in results.levels)
    rows = list(csv.DictReader(io.StringIO(levels_csv(replace(results, levels=levels)))))
    assert rows and not [k for k in rows[0] if k.startswith("histograms")]
    assert "p99_ttft_ms" in rows[0]


def test_the_results_record_a_custom_endpoint_path_but_never_the_key() -> None:
    key = "sk-path-secret-123"
    target = TargetConfig(
        base_url="http://127.0.0.1:8000", api_key=key, endpoint_path=f"/gw/{key}/chat?api-key={key}&v=2"
    )
    info = run_info(
        target, WorkloadConfig(), LoadTarget(concurrency=1), options=EngineOptions(), workers=1, model="m",
        started_at_s=0.0,
    )  # fmt: skip
    results = build_results(info, frozen.snapshot(), [], ClientSummary(1.0, 0.2, saturated=False))
    assert results.config.endpoint_path == "/gw/***/chat?api-key=hidden&v=hidden"
    assert key not in orjson.dumps(to_json(results)).decode()
    assert _results().config.endpoint_path is None  # the flavour's own path


def test_append_result_is_one_object_per_level_per_line(tmp_path: Path) -> None:
    """vLLM's --append-result: json.dump per run, a newline before each when the file is not empty; so a
    reader that takes a line at a time (as vLLM's own scripts do) gets every level, after the earlier runs."""
    results = _results()
    path = tmp_path / "runs.jsonl"
    append_vllm_results(results, path)
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == len(results.levels) and not path.read_bytes().endswith(b"\n")
    records = [orjson.loads(line) for line in lines]
    assert records == [orjson.loads(orjson.dumps(vllm_level(results, lv))) for lv in results.levels]
    assert all(list(r)[: len(VLLM_KEYS)] == VLLM_KEYS for r in records)
    append_vllm_results(results, path)  # a second run goes after the first, as vLLM appends
    assert len(path.read_bytes().split(b"\n")) == 2 * len(results.levels)
    one_run = b"\n".join(orjson.dumps(vllm_level(results, lv)) for lv in results.levels)
    assert vllm_appended(results, b"") == one_run


def test_vllm_carries_the_peaks_it_lacked() -> None:
    results = _results()
    level = replace(results.levels[0], max_output_tokens_per_s=412.0, max_concurrent_requests=9)
    record = vllm_level(results, level)
    assert record["max_output_tokens_per_s"] == 412.0 and record["max_concurrent_requests"] == 9
    keys = list(record)
    assert keys.index("total_token_throughput") + 1 == keys.index("max_output_tokens_per_s")


def test_the_export_subcommand_writes_each_export_of_a_saved_file(tmp_path: Path) -> None:
    import subprocess

    results = _results()
    saved = write_results(results, tmp_path / "run.json")

    def export(*args: str) -> subprocess.CompletedProcess[str]:
        return tokentop("export", str(saved), *args)

    r = export("--to", "vllm")
    assert r.returncode == 0, r.stderr
    files = sorted((tmp_path / "run-vllm").glob("*.json"))
    assert len(files) == len(results.levels) and set(r.stdout.split()) == {str(p) for p in files}
    r = export("--to", "vllm", "--append", "--out", str(tmp_path / "all.jsonl"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "all.jsonl").read_bytes() == vllm_appended(results)
    r = export("--to", "csv")
    assert r.returncode == 0 and (tmp_path / "run.csv").read_text() == levels_csv(results)
    r = export("--to", "llmd")
    assert r.returncode == 0 and len(list((tmp_path / "run-llmd").glob("*.json"))) == len(results.levels)
    (tmp_path / "bad.json").write_text("{}")
    r = tokentop("export", str(tmp_path / "bad.json"), "--to", "csv")
    assert r.returncode == 1 and "not a tokentop results file" in r.stderr and len(r.stderr.splitlines()) == 1
    r = export("--to", "csv", "--append")
    assert r.returncode == 2 and "--append" in r.stderr
