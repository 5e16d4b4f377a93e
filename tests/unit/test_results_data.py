"""Results from plain data: built with no engine, written by the one writer, read back by the one reader
(older files too), every key the same as before the model existed."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support import frozen
from tests.unit.results_data import frozen_info, frozen_results
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig
from tui.engine.results import model as rm
from tui.engine.results.build import ClientSummary, LevelExtras, build_results
from tui.engine.results.definitions import DEFINITIONS
from tui.engine.results.files import ResultsFileError, dump_results, read_results, to_json, write_results
from tui.engine.results.watch_model import WatchResults, WatchTarget
from tui.engine.snapshot import LevelView, Stats

SECRET = "sk-results-secret-0d15ea5e"

# The keys the results wrote before they were a typed model (read off the dict builder it replaced): the model
# writes exactly these, in this order, so scripts that read results files keep working.
TOP_KEYS = [
    "tool", "version", "started_at", "interrupted", "interrupted_by", "target", "config", "definitions",
    "levels", "saturation", "capacity_at_slo", "client", "totals", "fatal", "notices", "server",
]  # fmt: skip
CONFIG_KEYS = [
    "isl", "osl", "fixed_osl", "seed", "prompt_salt", "timeout_s", "workers", "header_names", "extra_body",
    "demo",
    "endpoint_path", "slo_ttft_ms", "slo_tpot_ms", "slo_target", "min_window_s", "min_steady_requests",
    "workload", "isl_probe",
]  # fmt: skip
"""(``slo_target`` is new, written with an SLO: these results have one.)"""
STATS = ["mean", "median", "std", "p50", "p90", "p95", "p99", "min", "max"]


def _stat_keys(prefix: str) -> list[str]:
    return [f"{s}_{prefix}_ms" for s in STATS]


LEVEL_KEYS = [
    "level_id", "mode", "concurrency", "duration", "completed", "failed", "total_input_tokens",
    "total_output_tokens", "request_throughput", "output_throughput", "total_token_throughput",
    "request_goodput",
    *_stat_keys("ttft"), *_stat_keys("tpot"), *_stat_keys("itl"), *_stat_keys("e2el"), *_stat_keys("itl_e2e"),
    "tokens_per_chunk", "per_request_output_throughput", "steady", "too_short", "steady_from_s",
    "window_from_s", "window_to_s", "started_s", "ended_s", "level_completed", "level_failed", "cancelled",
    "errors", "exact_stats", "client", "mean_input_tokens", "mean_output_tokens", "mean_reasoning_tokens",
    *_stat_keys("ttfa"), "cached_prompt_tokens", "prefix_cache_hit_rate", "warm_cache", "client_saturated",
    "coalesced_chunk_gaps", "measured_over", "in_flight_at_end", "partial_output_tokens", "population",
]  # fmt: skip
RATE_ONLY = ["arrival", "max_concurrency", *_stat_keys("sched_lag"), "dropped_arrivals"]


def _document(url: str = "http://127.0.0.1:8000/v1") -> rm.Results:
    target = TargetConfig(
        base_url=url, model=None, api_key=SECRET, headers=(("x-auth", SECRET),), timeout_s=30.0, demo=True
    )
    options = EngineOptions(slo_ttft_ms=500.0)
    info = frozen_info(target=target, options=options, workers=2, model="sim-llama-8b")
    snap = frozen.snapshot()
    views = [(lv, LevelExtras(cancelled=1, max_cpu_share=0.4)) for lv in snap.levels]
    client = ClientSummary(1.5, 0.4, saturated=True, saturated_spans_s=((3.0, None),), notices=("note",))
    return build_results(info, snap, views, client)


def _same_stats(read: rm.Stats, live: Stats) -> None:
    for name in ("mean", "std", "p50", "p90", "p95", "p99", "min", "max"):
        want, got = getattr(live, name), getattr(read, name)
        assert got == want or (got is None and math.isnan(want)), name


def test_results_built_from_data_read_back_as_the_views(tmp_path: Path) -> None:
    doc = _document()
    path = write_results(doc, tmp_path / "results.json")
    res = read_results(path)
    # the reader gives back what the writer was given (free-form parts such as config.workload as JSON has
    # them: lists, not tuples), and reading what it writes again changes nothing
    assert dump_results(res) == dump_results(doc)
    assert read_results(write_results(res, tmp_path / "again.json")) == res
    assert (res.tool, res.target.model, res.target.endpoint, res.config.workers) == (
        "tokentop", "sim-llama-8b", "chat", 2,
    )  # fmt: skip
    assert res.saturation.knee is not None and res.saturation.knee.level_id == 3
    assert res.client.saturated and res.notices == ("note",)
    assert res.config.slo_ttft_ms == 500.0 and res.config.slo_tpot_ms is None
    assert (res.totals.completed, res.totals.failed) == (148, 2)
    for read, live in zip(res.levels, frozen.LEVELS, strict=True):
        assert isinstance(live, LevelView)
        assert (read.level_id, read.mode, read.value, read.steady) == (
            live.level_id, live.mode, live.value, live.steady,
        )  # fmt: skip
        assert (read.completed, read.failed) == (live.window_completed, live.window_failed)
        assert read.output_throughput == live.output_tps and read.request_throughput == live.request_per_s
        assert read.total_token_throughput is None and math.isnan(live.total_tps)  # NaN -> null -> None
        assert read.errors == dict(live.errors)
        for metric, attr in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl_chunk"), ("e2el", "e2el")):
            _same_stats(getattr(read, metric), getattr(live, attr))
    assert res.saturation.peak_output_throughput == max(lv.output_tps for lv in frozen.LEVELS if lv.steady)


def test_the_model_writes_the_keys_results_files_always_had() -> None:
    doc = to_json(frozen_results(both=True))
    assert list(doc) == TOP_KEYS
    assert list(doc["config"]) == CONFIG_KEYS
    assert list(doc["target"]) == ["url", "model", "endpoint"]
    for level in doc["levels"]:
        want = list(LEVEL_KEYS)
        if level["mode"] == "rate":
            want[want.index("concurrency")] = "request_rate"
            want[want.index("duration") : want.index("duration")] = RATE_ONLY[:2]
            want[want.index("mean_input_tokens") : want.index("mean_input_tokens")] = RATE_ONLY[2:]
        if level.get("request_goodput") is None:  # only with an SLO, as before (vLLM's without --goodput)
            want.remove("request_goodput")
        assert list(level) == want
    assert doc["definitions"] == DEFINITIONS


def test_every_key_of_the_model_is_on_the_manual_page() -> None:
    """The results page of the manual names every key the model writes (a stats key by its metric, e.g.
    p99_ttft_ms by `ttft`), so a key added to the model without its definition fails here."""
    from tui import manual

    page = manual.page("results")
    assert page is not None
    extras = LevelExtras(max_output_tokens_per_s=1.0, max_concurrent_requests=2, histograms=None)
    doc = to_json(
        replace(
            frozen_results(both=True, extras=extras),
            clock=rm.Clock(perf_t0_ns=0, unix_t0_ns=0),
            ramp=RAMP,
        )
    )
    keys = (
        set(doc) | set(doc["config"]) | set(doc["saturation"]) | set(doc["ramp"]) | {"histograms", "server"}
    )
    for level in doc["levels"]:
        keys |= set(level)
    missing = []
    for key in sorted(keys):
        parts = key.split("_")
        name = "_".join(parts[1:-1]) if parts[0] in STATS and key.endswith("_ms") else key
        if f"`{name}`" not in page.text:
            missing.append(key)
    assert not missing, f"results keys not on tui/manual/results.md: {missing}"
    for metric in ("ttft", "tpot", "itl", "e2el", "itl_e2e", "ttfa", "sched_lag"):
        assert f"- `{metric}`" in page.text  # each metric defined with its population


RAMP = rm.Ramp(
    stopped_by="knee",
    reason="knee at 4 users: 176 of a 201 tok/s peak",
    mode="concurrency",
    level_ids=(1, 2, 3, 4),
    stopped_at_level_id=4,
    knee=rm.Knee(level_id=3, value=4.0, output_throughput=176.0, peak_output_throughput=201.0),
    peak_output_throughput=201.0,
    peak_level_id=4,
)


def test_the_ramps_verdict_reads_back_and_is_absent_without_one(tmp_path: Path) -> None:
    assert "ramp" not in to_json(frozen_results())  # no ramp stopped: no key (older readers see none)
    path = write_results(replace(frozen_results(), ramp=RAMP), tmp_path / "r.json")
    assert read_results(path).ramp == RAMP
    assert list(orjson.loads(path.read_bytes()))[9:11] == ["saturation", "ramp"]


def test_an_older_file_still_reads(tmp_path: Path) -> None:
    """A file from before histograms, TTFA, LLMPerf ITL, the client section, prefix-cache figures and the
    ISL probe: the newer keys read as their defaults."""
    doc = to_json(frozen_results())
    newer = ["histograms", "cached_prompt_tokens", "prefix_cache_hit_rate", "client", "too_short",
             "mean_reasoning_tokens", *_stat_keys("ttfa"), *_stat_keys("itl_e2e")]  # fmt: skip
    for level in doc["levels"]:
        for k in newer:
            level.pop(k, None)
    for k in ("client", "started_at", "interrupted_by", "notices"):
        del doc[k]
    for k in ("isl_probe", "workload", "endpoint_path", "workers"):
        del doc["config"][k]
    path = tmp_path / "old.json"
    path.write_bytes(orjson.dumps(doc))
    res = read_results(path)
    assert res.started_at == "" and res.config.workers == 1 and res.config.isl_probe is None
    assert all(lv.itl_e2e is None and lv.ttfa is None and lv.histograms is None for lv in res.levels)
    assert not res.client.saturated and res.levels[0].client == rm.LevelClient()


def test_unknown_keys_are_kept_and_written_back(tmp_path: Path) -> None:
    """A newer file (a key another part of tokentop added) loses nothing through this reader and writer."""
    doc = to_json(frozen_results())
    doc["sessions"] = {"id": "abc"}
    doc["levels"][0]["queue_depth_at_end"] = 3
    doc["config"]["future_knob"] = "s41t"
    path = tmp_path / "newer.json"
    path.write_bytes(orjson.dumps(doc))
    res = read_results(path)
    assert res.extra == {"sessions": {"id": "abc"}} and res.levels[0].extra == {"queue_depth_at_end": 3}
    assert res.config.extra == {"future_knob": "s41t"}
    again = orjson.loads(dump_results(res))
    assert again["sessions"] == {"id": "abc"} and again["levels"][0]["queue_depth_at_end"] == 3
    assert again["config"]["future_knob"] == "s41t"


def test_the_isl_probe_reads_typed_and_writes_back_the_same_keys(tmp_path: Path) -> None:
    doc = to_json(frozen_results())
    probe = {
        "asked": True,
        "sent": False,
        "skipped": "a dataset",
        "observations": [[10, 19], [20, 29]],
        "x": 1,
    }
    doc["config"]["isl_probe"] = probe
    path = tmp_path / "probe.json"
    path.write_bytes(orjson.dumps(doc))
    res = read_results(path)
    assert res.config.isl_probe == rm.IslProbe(
        asked=True, sent=False, skipped="a dataset", observations=((10, 19), (20, 29)), extra={"x": 1}
    )
    assert orjson.loads(dump_results(res))["config"]["isl_probe"] == probe
    doc["config"]["isl_probe"] = {**probe, "observations": [[10, "many"]]}
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(ResultsFileError, match=r"config\.isl_probe\.observations\[0\]\[1\]"):
        read_results(path)


def test_a_levels_population_reads_typed_and_writes_back_the_same_keys(tmp_path: Path) -> None:
    doc = to_json(frozen_results())
    population = {
        "output_throughput": {"unfinished_included": True},
        "ttft": {"n": 4, "unfinished_included": True, "since_s": None},
        "e2el": {"n": 0, "unfinished_included": False, "null_because": "no request finished in the window"},
    }
    doc["levels"][0]["population"] = population
    path = tmp_path / "population.json"
    path.write_bytes(orjson.dumps(doc))
    read = read_results(path).levels[0].population
    assert read is not None and read["ttft"] == rm.MetricPopulation(
        n=4, unfinished_included=True, since_s=None, has_since=True
    )
    assert read["output_throughput"].n is None and read["e2el"].null_because
    assert orjson.loads(dump_results(read_results(path)))["levels"][0]["population"] == population


def test_results_hold_no_secret_and_no_url_password() -> None:
    doc = _document("http://user:hunter2@127.0.0.1:8000/v1")
    text = dump_results(doc).decode()
    assert SECRET not in text and "hunter2" not in text and "user:" not in text
    want = {"url": "http://127.0.0.1:8000/v1", "model": "sim-llama-8b", "endpoint": "chat"}
    assert to_json(doc)["target"] == want
    assert doc.config.header_names == ("x-auth",)


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
    doc: dict[str, Any] = to_json(_document())
    doc["levels"][1]["p99_ttft_ms"] = "fast"
    bad.write_bytes(orjson.dumps(doc))
    with pytest.raises(ResultsFileError, match=r"expected a number at levels\[1\]\.p99_ttft_ms, got 'fast'"):
        read_results(bad)
    del doc["levels"][0]["duration"]
    bad.write_bytes(orjson.dumps(doc))
    with pytest.raises(ResultsFileError, match=r"no 'duration' at levels\[0\]"):
        read_results(bad)
    del doc["levels"][0]["concurrency"]
    doc["levels"][0]["duration"] = 1.0
    bad.write_bytes(orjson.dumps(doc))
    with pytest.raises(ResultsFileError, match=r"no 'concurrency' at levels\[0\]"):
        read_results(bad)


def test_a_watch_file_is_not_a_run() -> None:
    watch = WatchResults(version="1", duration=2.0, target=WatchTarget(url="http://h:1"))
    assert to_json(watch)["mode"] == "watch"
    assert dataclasses.replace(watch, stopped_by="quit").stopped_by == "quit"


def test_a_rate_level_carries_its_arrival_and_load() -> None:
    res = frozen_results(rate=True)
    level = to_json(res)["levels"][0]
    assert level["request_rate"] == 2.0 and level["arrival"] == "poisson" and level["max_concurrency"] == 64
    assert "concurrency" not in level and "p99_sched_lag_ms" in level
    assert res.levels[0].name == "r=2/s" and res.modes == ("rate",)
    assert LoadTarget(mode="rate", rate=2.0).arrival == "poisson"


def test_the_workload_reads_typed_and_writes_back_what_the_plain_record_wrote(tmp_path: Path) -> None:
    """``config.workload`` is the model's `Workload`: its JSON is the plain `asdict` record it replaced (every
    nested part set), an unknown key is kept in ``extra``, and a wrong shape is one line naming the key."""
    from tui.engine.config import DatasetConfig, LengthDist, Scenario, TraceConfig, WorkloadConfig
    from tui.engine.host.config_record import workload_record
    from tui.engine.results.codec import encode

    config = WorkloadConfig(
        isl=40, osl=7, fixed_osl=False, seed=3, prompt_salt="s41t",
        isl_dist=LengthDist("normal", 1, 61, 40.0, 5.0), osl_dist=LengthDist("uniform", 2, 6),
        scenarios=(Scenario(10, 5, 2.0), Scenario(20, 3)), dataset=DatasetConfig("d.jsonl", entries=4),
        shared_prefix=16, turns=2, trace=TraceConfig("t.jsonl", duration_s=9.0), isl_observations=((10, 19),),
        tokenizer="tok", shared_prefix_sized=(16, 17),
    )  # fmt: skip
    plain = dataclasses.asdict(config)
    del plain["isl_observations"]
    record = workload_record(config)
    assert orjson.dumps(encode(record)) == orjson.dumps(plain)
    doc = to_json(frozen_results())
    doc["config"]["workload"] = {**orjson.loads(orjson.dumps(plain)), "future_knob": 1}
    path = tmp_path / "workload.json"
    path.write_bytes(orjson.dumps(doc))
    res = read_results(path)
    assert res.config.workload is not None
    assert (res.config.workload.shared_prefix, res.config.workload.scenarios[1]["isl"]) == (16, 20)
    assert res.config.workload.shared_prefix_sized == (16, 17) and res.config.workload.extra == {
        "future_knob": 1
    }
    assert orjson.loads(dump_results(res))["config"]["workload"] == doc["config"]["workload"]
    doc["config"]["workload"]["turns"] = "two"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(ResultsFileError, match=r"config\.workload\.turns"):
        read_results(path)


def test_a_levels_server_figures_read_typed_and_write_the_summarys_keys_in_its_order(tmp_path: Path) -> None:
    """``Level.server`` is the model's `LevelServer`: built from `ServerView.level_summary`, it writes that
    dict's keys in its order (the canary's only when one ran); read back typed, an unknown key kept."""
    from tui.engine.results.codec import encode
    from tui.engine.results.level_server import level_server
    from tui.engine.server_metrics.view import ServerView

    summary = {**ServerView(kind="vllm", model="m").level_summary(0, 10**9), "running_mean": 6.5}
    typed = level_server(summary)
    assert typed is not None and typed.running_mean == 6.5 and typed.ttft_ms is not None
    assert orjson.dumps(encode(typed)) == orjson.dumps(summary)
    with_canary = level_server({**summary, "canary": None})
    assert with_canary is not None and list(encode(with_canary)) == [*summary, "canary"]
    doc = to_json(frozen_results())
    doc["levels"][0]["server"] = {**summary, "future_gauge": 2.0}
    path = tmp_path / "server.json"
    path.write_bytes(orjson.dumps(doc))
    res = read_results(path)
    server = res.levels[0].server
    assert server is not None and (server.kind, server.running_mean, server.restarts) == ("vllm", 6.5, 0)
    assert server.extra == {"future_gauge": 2.0} and not server.has_canary
    assert orjson.loads(dump_results(res))["levels"][0]["server"] == doc["levels"][0]["server"]


def test_a_percentiles_interval_and_the_throughputs_read_back(tmp_path: Path) -> None:
    """``ci95_ms`` / ``ci95`` are pairs in the model, lists in the file: a results file with an interval
    reads back (it once failed to), and a wrong item is named by its key."""
    doc = to_json(frozen_results())
    population = {
        "output_throughput": {"unfinished_included": False, "ci95": [10, 12.5]},
        "ttft": {"n": 40, "unfinished_included": False, "p99": {"ci95_ms": [50.0, 80.0], "bounded": True}},
    }
    doc["levels"][0]["population"] = population
    path = tmp_path / "intervals.json"
    path.write_bytes(orjson.dumps(doc))
    read = read_results(path).levels[0].population
    assert read is not None and read["output_throughput"].ci95 == (10.0, 12.5)
    p99 = read["ttft"].p99
    assert p99 is not None and p99.ci95_ms == (50.0, 80.0) and p99.bounded
    population["ttft"]["p99"]["ci95_ms"] = [50.0, "wide"]  # type: ignore[index]
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(ResultsFileError, match=r"population\.ttft\.p99\.ci95_ms\[1\]"):
        read_results(path)
