"""What a results file says about the workload, against the simulator on 127.0.0.1: the prefix cache's hit
rate per level (in the results and the CSV), the workload as configured, and the ISL probe sent only for
synthetic prompts."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_helpers import bench, read_jsonl
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    truth = tmp_path_factory.mktemp("sim") / "truth.jsonl"
    with SimServer("flat", time_scale=20, truth_log=truth) as server:
        yield server.url, truth


def run(sim: tuple[str, Path], tmp_path: Path, *args: str) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """``tokentop bench`` against the module's simulator, one level of 2 users: the results and CSV rows."""
    out, table = tmp_path / "results.json", tmp_path / "levels.csv"
    proc = bench(
        "--url", sim[0], "--concurrency", "2", "--requests", "8", "--osl", "4", "--output", str(out),
        "--csv", str(table), "--quiet", *args,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with table.open() as f:
        rows = list(csv.DictReader(f))
    return json.loads(out.read_text()), rows


def probes_sent(truth: Path) -> int:
    return sum(1 for r in read_jsonl(truth) if (r["client_request_id"] or "").startswith("probe-"))


def test_a_shared_prefix_is_a_cache_hit_rate_and_unique_prompts_are_none(
    sim: tuple[str, Path], tmp_path: Path
) -> None:
    shared, shared_rows = run(sim, tmp_path, "--isl", "32", "--shared-prefix", "256", "--seed", "3")
    unique, unique_rows = run(sim, tmp_path, "--isl", "32", "--seed", "4")
    (hit,) = shared["levels"]
    (miss,) = unique["levels"]
    assert hit["completed"] >= 8 and miss["completed"] >= 8
    # most of each prompt is the prefix, cached from the second request on (in whole 16-token blocks)
    assert 0.5 < hit["prefix_cache_hit_rate"] < 1.0, hit["prefix_cache_hit_rate"]
    assert hit["prefix_cache_hit_rate"] == pytest.approx(
        hit["cached_prompt_tokens"] / hit["total_input_tokens"]
    )
    # none at all: unique heads, and the ISL probe's prompts are not the run's first ones (no warm cache)
    assert miss["prefix_cache_hit_rate"] == 0.0 and miss["cached_prompt_tokens"] == 0
    assert float(shared_rows[0]["prefix_cache_hit_rate"]) == pytest.approx(hit["prefix_cache_hit_rate"])
    assert float(unique_rows[0]["prefix_cache_hit_rate"]) == pytest.approx(miss["prefix_cache_hit_rate"])
    # the probe still sizes a shared-prefix synthetic workload, and the config records the prefix
    assert (
        shared["config"]["isl_probe"]["sent"] is True
        and len(shared["config"]["isl_probe"]["observations"]) == 4
    )
    assert shared["config"]["workload"]["shared_prefix"] == 256 and shared["config"]["workload"]["seed"] == 3


def test_a_dataset_run_records_the_dataset_and_sends_no_probe(sim: tuple[str, Path], tmp_path: Path) -> None:
    before = probes_sent(sim[1])
    results, _ = run(sim, tmp_path, "--dataset", str(DATA / "sample.jsonl"), "--dataset-order", "shuffle")
    assert probes_sent(sim[1]) == before
    probe = results["config"]["isl_probe"]
    assert probe == {
        "asked": True, "sent": False, "skipped": "dataset prompts: their lengths are the file's",
        "observations": [],
    }  # fmt: skip
    dataset = results["config"]["workload"]["dataset"]
    assert dataset["path"] == str(DATA / "sample.jsonl")
    assert (dataset["format"], dataset["order"], dataset["chat"]) == ("jsonl", "shuffle", True)
    assert dataset["entries"] > 0


def test_a_conversation_is_probed_for_its_first_turns_and_its_history_is_cached(
    sim: tuple[str, Path], tmp_path: Path
) -> None:
    before = probes_sent(sim[1])
    results, _ = run(sim, tmp_path, "--turns", "3", "--isl", "40")
    assert probes_sent(sim[1]) == before + 4  # each first turn is a synthetic prompt of --isl tokens
    config = results["config"]
    assert config["isl_probe"]["sent"] is True and config["isl_probe"]["skipped"] is None
    assert config["workload"]["turns"] == 3
    (level,) = results["levels"]
    assert level["prefix_cache_hit_rate"] > 0.2  # turns 2 and 3 start with the turn before


def test_the_config_records_shaped_lengths(sim: tuple[str, Path], tmp_path: Path) -> None:
    results, _ = run(
        sim,
        tmp_path,
        "--isl-dist",
        "normal:40,5",
        "--osl-dist",
        "uniform:2,6",
        "--seed",
        "9",
        "--no-isl-probe",
    )
    workload = results["config"]["workload"]
    assert workload["isl_dist"] == {"kind": "normal", "lo": 1, "hi": 61, "mean": 40.0, "stddev": 5.0}
    assert {k: workload["osl_dist"][k] for k in ("kind", "lo", "hi")} == {"kind": "uniform", "lo": 2, "hi": 6}
    assert (workload["seed"], workload["scenarios"], workload["dataset"], workload["tokenizer"]) == (
        9,
        [],
        None,
        None,
    )
    assert results["config"]["isl_probe"] == {
        "asked": False,
        "sent": False,
        "skipped": None,
        "observations": [],
    }
    results, _ = run(sim, tmp_path, "--scenarios", "30x4:0.7,60x2:0.3", "--no-isl-probe")
    assert results["config"]["workload"]["scenarios"] == [
        {"isl": 30, "osl": 4, "weight": 0.7}, {"isl": 60, "osl": 2, "weight": 0.3},
    ]  # fmt: skip
