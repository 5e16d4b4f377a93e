"""The canary user and TTFT in parts, through the engine against the simulator's own record (same clock).

The canary's TTFT is the truth log's for those requests within the usual timing tolerance, and adding it
changes no level's figures; per level, the server's parts add up to the client's TTFT, and queue time rises
once the load is above the simulator's slots, as its truth log says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.engine_helpers import joined, read_jsonl, running_handle, wait_for
from tui.engine.config import EngineOptions, LoadTarget, WorkloadConfig
from tui.engine.host.canary import CANARY_WORKER
from tui.engine.results.aiperf import aiperf_export, read_requests_log
from tui.engine.results.files import to_json
from tui.sim.launch import SimServer

pytestmark = [pytest.mark.timeout(90), pytest.mark.timing]
MS = 1e6


def test_the_canary_sees_the_servers_ttft_and_no_level_counts_it(tmp_path: Path) -> None:
    truth_log = tmp_path / "truth.jsonl"
    options = EngineOptions(canary_rate=8.0, metrics_interval_s=0.2)
    with (
        SimServer("flat", time_scale=2.0, truth_log=truth_log) as sim,
        running_handle(
            sim.url,
            LoadTarget(concurrency=2),
            tmp_path,
            workload=WorkloadConfig(isl=40, osl=24),
            options=options,
        ) as handle,
    ):
        wait_for(handle, lambda s: s.completed >= 20, 30, "20 requests")
        view = handle.server_view()
        assert view is not None and view.canary is not None and view.canary.rate == 8.0
        wait_for(
            handle, lambda s: (v := handle.server_view()) is not None and v.canary and v.canary.n >= 5, 10
        )
        handle.set_load(LoadTarget(concurrency=2, paused=True))
        wait_for(handle, lambda s: s.in_flight == 0, 10, "drain")
        typed = handle.results()
        results = to_json(typed)
    records = read_jsonl(tmp_path / "requests.jsonl")
    # an AIPerf export of the run holds the load's requests only, and calls none of the canary's foreign
    exported = aiperf_export(typed, read_requests_log(tmp_path / "requests.jsonl"))
    assert exported.other_run == 0 and exported.malformed == 0
    assert len(exported.lines) == sum(1 for r in records if not r.get("canary"))
    canaries = [r for r in records if r.get("canary")]
    load = [r for r in records if not r.get("canary")]
    assert len(canaries) >= 5 and all(
        r["client_request_id"].startswith(f"{CANARY_WORKER}-") for r in canaries
    )
    truth = read_jsonl(truth_log)
    assert all(
        t["completion_tokens"] == 1 for t in truth if t["client_request_id"].startswith(f"{CANARY_WORKER}-")
    )
    # no level counts a canary: the level's requests are the load's, one for one
    level = results["levels"][0]
    ok_load = [r for r in load if r["status"] == "ok" and r["level"] == level["level_id"]]
    assert level["level_completed"] == len(ok_load)
    assert level["server"]["canary"]["n"] >= 1 and level["server"]["canary"]["mean_ms"] > 0
    assert level["server"]["canary"]["p99_ms"] >= level["server"]["canary"]["mean_ms"]
    assert results["server"]["canary_rate"] == 8.0
    # the canary's TTFT is the server's, as the load's is (the usual tolerance of test_engine_truth)
    errors = [
        abs((r["first_content_ns"] - r["sent_ns"]) - (t["first_token_ns"] - t["arrival_ns"])) / MS
        for r, t in joined(tmp_path / "requests.jsonl", truth_log)
        if r.get("canary") and r["status"] == "ok"
    ]
    load_errors = [
        abs((r["first_content_ns"] - r["sent_ns"]) - (t["first_token_ns"] - t["arrival_ns"])) / MS
        for r, t in joined(tmp_path / "requests.jsonl", truth_log)
        if not r.get("canary") and r["status"] == "ok"
    ]
    assert len(errors) >= 5
    said = f"canary errors p50/p90 (ms) {np.percentile(errors, [50, 90])}, the load's "
    said += f"{np.percentile(load_errors, [50, 90])}"
    # as in test_engine_truth, the least-delayed end: a stamp in the wrong place shifts every canary, a busy
    # machine delays some. Over 20 runs at load ~7-9 with a core kept busy: min 0.37-0.71 ms, medians
    # 0.85-3.0 ms, p90 3.4-24 ms.
    assert min(errors) < 1.5, said


def test_ttft_parts_per_level_add_up_and_queue_rises_above_the_slots(tmp_path: Path) -> None:
    """tiny-cpu has 4 slots: at 2 users nothing waits, at 8 half of them do. Per level the server's queue
    mean is the truth log's (requests admitted in the window), queue + prefill + the rest of the server's
    is its TTFT, and the client's TTFT over the same requests (first token between the same two scrapes,
    as many as the server counted) is that plus a small network/client part: no part below 0, and they add
    up to the client's TTFT (within the parts read below 0 and saved as 0: a few µs here)."""
    truth_log = tmp_path / "truth.jsonl"
    options = EngineOptions(metrics_interval_s=0.2)
    workload = WorkloadConfig(isl=20, osl=8)
    with (
        SimServer("tiny-cpu", time_scale=10.0, truth_log=truth_log) as sim,
        running_handle(
            sim.url, LoadTarget(concurrency=2), tmp_path, workload=workload, options=options
        ) as handle,
    ):
        wait_for(handle, lambda s: s.completed >= 60, 30, "60 requests at 2 users")
        handle.set_load(LoadTarget(concurrency=8))
        wait_for(handle, lambda s: s.completed >= 200, 40, "140 more at 8 users")
        handle.set_load(LoadTarget(concurrency=8, paused=True))
        wait_for(handle, lambda s: s.in_flight == 0, 10, "drain")
        results = to_json(handle.results())
        t0_ns = handle.t0_ns
    truth = read_jsonl(truth_log)
    parts = []
    for level in results["levels"][:2]:
        p = level["server"]["ttft_parts"]
        assert p is not None and not set(p["missing"]) & {"queue_ms", "prefill_ms", "server_ttft_ms"}
        server = p["queue_ms"] + p["prefill_ms"] + p["server_other_ms"]
        assert server == pytest.approx(p["server_ttft_ms"], abs=0.5)
        # one population: the client's requests whose first token landed between the parts' two scrapes
        assert abs(p["client_count"] - p["count"]) <= max(2, 0.05 * p["count"]), p
        assert "network_client_ms" not in p["bounds"], p
        assert min(p[k] for k in ("queue_ms", "prefill_ms", "server_other_ms", "network_client_ms")) >= 0, p
        assert server + p["network_client_ms"] == pytest.approx(p["client_ttft_ms"], abs=0.5), p
        # the client's TTFT is the server's plus a little: the parts account for it within a few ms
        assert p["network_client_ms"] < 0.1 * p["client_ttft_ms"] + 5.0, p
        assert p["server_other_ms"] < 0.1 * p["server_ttft_ms"] + 2.0, p
        parts.append(p)
    low, high = parts
    assert high["queue_ms"] > 5 * max(low["queue_ms"], 1.0), (low, high)
    # the simulator's record: requests that were waiting at 8 users waited about as long as the server says
    for level, p in zip(results["levels"][:2], parts, strict=True):
        # scrapes every 0.2 s bound the window the histograms' deltas cover: a few ms either way
        assert level_queue_truth(truth, level, t0_ns) == pytest.approx(p["queue_ms"], rel=0.2, abs=3.0)


def level_queue_truth(truth: list[dict[str, Any]], level: dict[str, Any], t0_ns: int) -> float:
    """The truth log's mean queue time of the requests admitted in the level's window (the server observes
    a request's queue time at its admission)."""
    t_from, t_to = t0_ns + level["window_from_s"] * 1e9, t0_ns + level["window_to_s"] * 1e9
    waits = [
        (t["admitted_ns"] - t["arrival_ns"]) / MS
        for t in truth
        if t["admitted_ns"] and t_from <= t["admitted_ns"] <= t_to
    ]
    assert len(waits) >= 10, len(waits)
    return float(np.mean(waits))
