"""The llm-d Benchmark Report export, validated against llm-d's own published JSON Schema and model.

The schema is not copied here: it comes at test time from llm-d-benchmark's PyPI package
(``llmd-benchmark-report``, its ``br_v0_2_json_schema.json``, the 0.2 line), validated with ``jsonschema``;
its pydantic model (``load_benchmark_report``) also checks the units per field, as llm-d's tools read them.
"""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from tests.unit.results_data import frozen_results
from tui.engine.results.codec import encode
from tui.engine.results.files import write_results
from tui.engine.results.level_server import level_server
from tui.engine.results.llmd import llmd_report, llmd_reports, write_llmd_reports
from tui.engine.results.model import Results

llmd = pytest.importorskip("llmd_benchmark_report", reason="the test extra installs llmd-benchmark-report")


def _schema() -> dict[str, Any]:
    text = (importlib.resources.files("llmd_benchmark_report") / "br_v0_2_json_schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _with_server(results: Results) -> Results:
    figures = {"kind": "vllm", "running_mean": 6.5, "waiting_mean": 0.5, "kv_usage_mean": 0.31,
               "prefix_cache_hit_rate": 0.12, "ttft_ms": {"p50": 40.0, "count": 12.0}}  # fmt: skip
    levels = tuple(replace(lv, server=level_server(figures), scraped=True) for lv in results.levels)
    return replace(results, levels=levels, server={"kind": "vllm", "status": "ok"})


@pytest.mark.parametrize("shape", ["concurrency", "rate", "both", "server"])
def test_every_level_is_a_valid_benchmark_report(shape: str) -> None:
    results = frozen_results(rate=shape == "rate", both=shape == "both")
    if shape == "server":
        results = _with_server(results)
    validator = jsonschema.Draft202012Validator(_schema())
    reports = llmd_reports(results)
    assert len(reports) == len(results.levels)
    for report in reports:
        plain = orjson.loads(orjson.dumps(report))  # as a file holds it
        errors = sorted(validator.iter_errors(plain), key=lambda e: list(e.path))
        assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]
        llmd.load_benchmark_report(plain)  # llm-d's own model: units per field, version


def test_client_figures_under_request_performance_and_the_server_under_observability() -> None:
    results = _with_server(frozen_results())
    level = results.levels[1]
    report = llmd_report(results, level)
    assert report["version"] == "0.2"
    aggregate = report["results"]["request_performance"]["aggregate"]
    assert aggregate["requests"]["total"] == level.completed + level.failed
    assert aggregate["requests"]["failures"] == level.failed
    ttft = aggregate["latency"]["time_to_first_token"]
    assert ttft["units"] == "ms" and ttft["mean"] == level.ttft.mean and ttft["p99"] == level.ttft.p99
    assert aggregate["latency"]["inter_token_latency"]["p50"] == level.itl.p50
    assert aggregate["latency"]["time_per_output_token"]["units"] == "ms/token"
    assert aggregate["throughput"]["output_token_rate"] == {
        "units": "tokens/s",
        "mean": level.output_throughput,
    }
    observed = report["results"]["observability"]
    (component,) = observed["components"]
    assert component["component_label"] == "vllm"
    assert component["aggregate"]["kv_cache_usage"] == {"units": "fraction", "mean": 0.31}
    assert component["aggregate"]["running_requests"]["mean"] == 6.5
    assert level.server is not None
    assert observed["tokentop_server"] == encode(level.server)  # every scraped figure, as tokentop saved it
    load = report["scenario"]["load"]["standardized"]
    assert load["concurrency"] == level.concurrency and load["tool"] == "tokentop"


def test_a_level_without_samples_or_server_leaves_those_out() -> None:
    results = frozen_results()
    empty = replace(
        results.levels[0], ttft=replace(results.levels[0].ttft, mean=None), output_throughput=None
    )
    report = llmd_report(results, empty)
    aggregate = report["results"]["request_performance"]["aggregate"]
    assert "time_to_first_token" not in aggregate["latency"]
    assert "output_token_rate" not in aggregate["throughput"]
    assert "observability" not in report["results"]
    jsonschema.validate(orjson.loads(orjson.dumps(report)), _schema())


def test_the_reports_are_written_one_per_level(tmp_path: Path) -> None:
    results = frozen_results()
    paths = write_llmd_reports(results, tmp_path / "llmd")
    assert len(paths) == len(results.levels) == len({p.name for p in paths})
    for path in paths:
        jsonschema.validate(orjson.loads(path.read_bytes()), _schema())
    write_results(results, tmp_path / "run.json")
