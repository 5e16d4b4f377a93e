"""Answers longer than the level (4000 tokens at 100 tok/s: 40 s each): the rolling views and the level's
figures fill from what arrives, against the simulator's truth, while no request has finished."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_helpers import bench, read_jsonl, running_handle, wait_for
from tui.engine.config import LoadTarget, WorkloadConfig
from tui.engine.results.files import to_json
from tui.engine.results.vllm import vllm_level
from tui.engine.snapshot import LevelView, Snapshot
from tui.sim.launch import SimServer

pytestmark = [pytest.mark.timeout(90), pytest.mark.timing]
LONG = WorkloadConfig(isl=32, osl=4000)


def truth_tokens(truth_log: Path, t0_ns: int, from_s: float, to_s: float) -> float:
    """Tokens the server wrote inside [from_s, to_s) of run time, by its own truth log."""
    lo, hi = t0_ns + from_s * 1e9, t0_ns + to_s * 1e9
    return float(
        sum(
            k
            for t in read_jsonl(truth_log)
            for c, k in zip(t["chunk_ns"], t["chunk_tokens"], strict=True)
            if lo <= c < hi
        )
    )


def _level(s: Snapshot) -> LevelView | None:
    lv = s.levels[-1] if s.levels else None
    return lv if lv is not None and lv.steady and lv.window_s >= 3.0 else None


def test_a_level_of_answers_longer_than_it_is_measured_from_what_arrived(tmp_path: Path) -> None:
    truth_log = tmp_path / "truth.jsonl"
    sim = SimServer("flat", time_scale=2.0, truth_log=truth_log)  # 100 tok/s per stream
    with sim, running_handle(sim.start().url, LoadTarget(concurrency=4), tmp_path, workload=LONG) as handle:
        wait_for(handle, lambda s: any(lane.output_tokens > 0 for lane in s.lanes), 20, "a first token")
        _, snap, waited = wait_for(
            handle, lambda s: s.itl_hist[("chunk", 10.0)].stats.n > 0, 5, "ITL samples in the 10 s view"
        )
        assert waited < 2.0, f"the rolling ITL view took {waited:.1f} s to fill"
        assert snap.ttft_hist[10.0].stats.n >= 1
        found, shown, _ = wait_for(handle, _level, 25, "a level steady from its arrivals")
        assert found is not None
        lv = found
        assert shown.completed == 0 and lv.measured_over == "arrivals"
        assert lv.ttft.n == 4, "the level's TTFT counts the four streams still streaming"
        assert lv.itl_chunk.n > 1000 and lv.itl_chunk.p50 == pytest.approx(10.0, rel=0.15)
        assert lv.partial_output_tokens > 0 and lv.in_flight_at_end == 4
        assert lv.e2el.n == 0 and lv.finished_in_window == 0
        handle.stop(finish_in_flight=False, timeout_s=5.0)  # what `q` does
        saved = handle.results(interrupted="quit")
        results = to_json(saved)
        t0_ns = handle.t0_ns
    assert lv.window_from_s is not None and lv.window_to_s is not None
    truth = truth_tokens(truth_log, t0_ns, lv.window_from_s, lv.window_to_s)
    assert lv.output_tps == pytest.approx(truth / lv.window_s, rel=0.05)
    assert lv.output_tps == pytest.approx(400.0, rel=0.1)  # four streams at 100 tok/s
    # `q`: what is saved is the level up to the quit, measured the same way
    (level,) = results["levels"]
    assert all(t["status"] != "ok" for t in read_jsonl(truth_log)), "an answer finished"
    assert level["measured_over"] == "arrivals" and level["steady"] is True and level["too_short"] is False
    assert level["completed"] == 0 and level["in_flight_at_end"] == 4
    written = truth_tokens(truth_log, t0_ns, level["window_from_s"], level["window_to_s"])
    assert level["output_throughput"] == pytest.approx(written / level["duration"], rel=0.05)
    assert level["duration"] >= lv.window_s
    assert level["partial_output_tokens"] == pytest.approx(
        level["output_throughput"] * level["duration"], rel=0.01
    )
    ttft = level["population"]["ttft"]
    assert {k: ttft[k] for k in ("unfinished_included", "n", "since_s")} == {
        "unfinished_included": True,
        "n": 4,
        "since_s": level["started_s"],
    }
    assert ttft["p99"] == {"ci95_ms": None, "bounded": False}  # 4 samples bound no p99
    assert level["population"]["e2el"]["null_because"] == "no request finished in the window"
    assert level["mean_e2el_ms"] is None and level["mean_ttft_ms"] is not None
    assert sum(level["histograms"]["ttft"]["counts"]) == 4
    # the vLLM-shaped export keeps vLLM's meaning (completed requests only): these figures are tokentop's
    vllm = vllm_level(saved, saved.levels[0])
    assert vllm["output_throughput"] is None and vllm["mean_ttft_ms"] is None and vllm["p99_itl_ms"] is None
    assert vllm["tokentop_output_throughput"] == level["output_throughput"]
    assert (
        vllm["tokentop_mean_ttft_ms"] == level["mean_ttft_ms"]
        and vllm["tokentop_measured_over"] == "arrivals"
    )
    assert sum(level["histograms"]["itl"]["counts"]) == level["population"]["itl"]["n"] > 1000


def test_bench_duration_saves_the_level_without_waiting_for_the_answers(tmp_path: Path) -> None:
    truth_log = tmp_path / "truth.jsonl"
    out = tmp_path / "results.json"
    with SimServer("flat", time_scale=2.0, truth_log=truth_log) as sim:
        began = time.monotonic()
        proc = bench(
            "--url", sim.start().url, "--concurrency", "4", "--duration", "6", "--isl", "32", "--osl", "4000",
            "--output", str(out), "--quiet",
        )  # fmt: skip
        took = time.monotonic() - began
    assert took < 25, f"bench waited {took:.0f} s (the answers take 40 s)"
    results: dict[str, Any] = json.loads(out.read_text())
    (level,) = results["levels"]
    assert level["measured_over"] == "arrivals" and level["completed"] == 0
    assert level["output_throughput"] == pytest.approx(400.0, rel=0.1)
    assert proc.returncode == 0, proc.stderr
