"""Results from plain data: built from a `RunInfo` and frozen views with no engine, read back typed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.app import frozen
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.results import ClientSummary, RunInfo, build_results, write_results
from tui.engine.host.results_file import ResultsFileError, read_results
from tui.engine.snapshot import LevelView, Stats

SECRET = "sk-results-secret-0d15ea5e"


def _info(url: str = "http://127.0.0.1:8000/v1") -> RunInfo:
    target = TargetConfig(
        base_url=url, model=None, api_key=SECRET, headers=(("x-auth", SECRET),), timeout_s=30.0, demo=True
    )
    return RunInfo.of(
        target,
        WorkloadConfig(isl=64, osl=128),
        LoadTarget(mode="concurrency", concurrency=8),
        options=EngineOptions(slo_ttft_ms=500.0),
        workers=2,
        model="sim-llama-8b",
        started_at_s=1_700_000_000.0,
    )


def _document(url: str = "http://127.0.0.1:8000/v1") -> dict[str, Any]:
    snap = frozen.snapshot()
    views = [(lv, {"cancelled": 1, "max_cpu_share": 0.4}) for lv in snap.levels]
    client = ClientSummary(1.5, 0.4, saturated=True, saturated_spans_s=((3.0, None),), notices=("note",))
    return build_results(_info(url), snap, views, client)


def _same_stats(read: object, live: Stats) -> None:
    for name in ("mean", "std", "p50", "p90", "p95", "p99", "min", "max"):
        want, got = getattr(live, name), getattr(read, name)
        assert got == want or (math.isnan(got) and math.isnan(want)), name


def test_results_built_from_data_read_back_as_the_views(tmp_path: Path) -> None:
    path = write_results(_document(), tmp_path / "results.json")
    res = read_results(path)
    assert (res.tool, res.model, res.endpoint, res.workers, res.isl, res.osl) == (
        "tokentop", "sim-llama-8b", "chat", 2, 64, 128,
    )  # fmt: skip
    assert res.knee_level_id == 3 and res.client_saturated and res.notices == ("note",)
    assert res.slo_ttft_ms == 500.0 and res.slo_tpot_ms is None
    assert (res.completed, res.failed) == (148, 2)
    assert len(res.levels) == len(frozen.LEVELS)
    for read, live in zip(res.levels, frozen.LEVELS, strict=True):
        assert isinstance(live, LevelView)
        assert (read.level_id, read.mode, read.value, read.steady) == (
            live.level_id, live.mode, live.value, live.steady,
        )  # fmt: skip
        assert (read.window_completed, read.window_failed) == (live.window_completed, live.window_failed)
        assert read.output_tps == live.output_tps and read.request_per_s == live.request_per_s
        assert math.isnan(read.total_tps) and math.isnan(live.total_tps)  # NaN -> null -> NaN
        assert read.errors == live.errors
        for metric in ("ttft", "tpot", "itl_chunk", "e2el", "itl_e2e"):
            _same_stats(getattr(read, metric), getattr(live, metric))
    assert res.peak_output_tps == max(lv.output_tps for lv in frozen.LEVELS if lv.steady)


def test_results_hold_no_secret_and_no_url_password(tmp_path: Path) -> None:
    doc = _document("http://user:hunter2@127.0.0.1:8000/v1")
    text = orjson.dumps(doc).decode()
    assert SECRET not in text and "hunter2" not in text and "user:" not in text
    assert doc["target"] == {"url": "http://127.0.0.1:8000/v1", "model": "sim-llama-8b", "endpoint": "chat"}
    assert doc["config"]["header_names"] == ["x-auth"]
    assert "hunter2" not in repr(_info("http://user:hunter2@h:1/v1"))


def test_read_results_errors_name_the_file_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ResultsFileError, match=r"nope\.json: no such file"):
        read_results(missing)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"bad\.json: not JSON"):
        read_results(bad)
    cases = {
        "[1, 2]": "expected an object, got list",
        '{"tool": "vllm"}': "tool is 'vllm'",
        '{"tool": "tokentop", "version": "1"}': "no 'target'",
    }
    for text, message in cases.items():
        bad.write_text(text)
        with pytest.raises(ResultsFileError, match=message) as info:
            read_results(bad)
        assert str(info.value).startswith(f"{bad}: not a tokentop results file:")
        assert "\n" not in str(info.value)
    doc = _document()
    doc["levels"][1]["p99_ttft_ms"] = "fast"
    bad.write_bytes(orjson.dumps(doc))
    with pytest.raises(ResultsFileError, match=r"expected a number at levels\[1\]\.p99_ttft_ms, got 'fast'"):
        read_results(bad)
    del doc["levels"][0]["duration"]
    bad.write_bytes(orjson.dumps(doc))
    with pytest.raises(ResultsFileError, match=r"no 'duration' at levels\[0\]"):
        read_results(bad)
