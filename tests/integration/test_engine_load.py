"""Load control against the simulator: targets change while running, levels are tagged, nothing is lost."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from tests.support.engine_helpers import read_jsonl, running_handle, wait_for
from tui.engine.config import LoadTarget, WorkloadConfig
from tui.engine.snapshot import Snapshot
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(60)

# flat profile at time scale 4: 200 tok/s per stream whatever the load, so a 40-token request takes ~0.2 s.
WORKLOAD = WorkloadConfig(isl=16, osl=40)
E2E_S = 0.2


@pytest.mark.parametrize("workers", [1, 2])
def test_concurrency_changes_take_effect_within_a_request_and_lose_nothing(
    tmp_path: Path, workers: int
) -> None:
    truth_log = tmp_path / "truth.jsonl"
    sim = SimServer("flat", time_scale=4.0, truth_log=truth_log)
    with (
        sim,
        running_handle(
            sim.start().url, LoadTarget(concurrency=2), tmp_path, workload=WORKLOAD, workers=workers
        ) as handle,
    ):
        wait_for(handle, lambda s: s.in_flight == 2 and s.completed >= 4, 15, "2 in flight")
        handle.set_load(LoadTarget(concurrency=6))
        _, _, took = wait_for(handle, lambda s: s.in_flight == 6, 5, "raise to 6")
        assert took < 0.5, f"raising took {took:.2f} s"  # starts at once (plus a batch interval)
        wait_for(handle, lambda s: s.completed >= 20, 15, "some requests at 6")
        handle.set_load(LoadTarget(concurrency=1))
        _, snap, took = wait_for(handle, lambda s: s.in_flight == 1, 5, "lower to 1")
        assert took < E2E_S * 2 + 0.5, f"lowering took {took:.2f} s"  # surplus users finish their request
        # Over the next requests the in-flight count stays at 1.
        done = snap.completed
        for _ in range(2):

            def progressed(s: Snapshot, d: int = done) -> bool:
                return s.completed > d

            _, snap, _ = wait_for(handle, progressed, 5, "progress at 1")
            assert snap.in_flight <= 1
            done = snap.completed
        handle.stop(finish_in_flight=True, timeout_s=5.0)
        snap = handle.snapshot()
        assert [(lv.level_id, lv.value) for lv in snap.levels] == [(1, 2.0), (2, 6.0), (3, 1.0)]
        assert snap.failed == 0 and snap.cancelled == 0
    records = read_jsonl(tmp_path / "requests.jsonl")
    truth = read_jsonl(truth_log)
    # every request sent was answered in full and recorded once: lowering cancelled nothing
    assert {r["client_request_id"] for r in records} == {t["client_request_id"] for t in truth}
    assert len(records) == len(truth) == snap.completed
    assert all(r["status"] == "ok" and r["output_tokens"] == 40 for r in records)
    assert len({r["id"] for r in records}) == len(records)
    by_level = Counter(r["level"] for r in records)
    assert set(by_level) == {1, 2, 3}
    if workers == 2:
        assert {r["client_request_id"].split("-")[0] for r in records} == {"0", "1"}


def test_open_loop_rate_cap_and_scheduling_lag(tmp_path: Path) -> None:
    sim = SimServer("flat", time_scale=4.0)
    load = LoadTarget(mode="rate", rate=25.0, arrival="constant")
    with sim, running_handle(sim.start().url, load, tmp_path, workload=WORKLOAD) as handle:
        wait_for(handle, lambda s: s.levels[0].steady and s.levels[0].window_completed >= 40, 15, "40 steady")
        # ~25 req/s with ~0.2 s each: about 5 in flight, none waiting
        handle.set_load(LoadTarget(mode="rate", rate=40.0, arrival="constant", max_concurrency=2))
        level_id = handle.level_id
        wait_for(handle, lambda s: s.levels[-1].completed >= 20, 15, "20 capped requests")
        handle.stop(finish_in_flight=True)
        snap = handle.snapshot()
    first, capped = snap.levels
    assert (first.mode, first.value, capped.value) == ("rate", 25.0, 40.0)
    # on time: 20 ms is set against the capped level's >100 ms, with room for a busy machine
    assert first.sched_lag.n > 10 and first.sched_lag.p50 < 20.0
    assert capped.level_id == level_id
    # 2 in flight x 0.2 s each can only serve ~10 req/s: arrivals queue behind the cap and their lag grows
    assert capped.sched_lag.p90 > 100.0
    # the sends kept their schedule: not the client's limit; the capped level's lag is the slots' wait, the
    # server's doing, so its sends are not judged (`send_shortfall`)
    assert first.send_shortfall is not None and first.send_shortfall < 0.05 and not first.client_limited
    assert capped.send_shortfall is None
    records = read_jsonl(tmp_path / "requests.jsonl")
    first_recs = [r for r in records if r["level"] == first.level_id]
    sched = sorted(r["scheduled_ns"] for r in first_recs)
    gaps = [(b - a) / 1e6 for a, b in itertools.pairwise(sched)]
    # constant arrivals on an absolute timeline: every interval is exactly 1/25 s
    assert all(abs(g - 40.0) < 0.01 for g in gaps), gaps[:5]
    assert first.request_per_s == pytest.approx(25.0, rel=0.2)


def test_pause_stops_issuing_and_resume_starts_a_new_level(tmp_path: Path) -> None:
    sim = SimServer("flat", time_scale=4.0)
    with (
        sim,
        running_handle(sim.start().url, LoadTarget(concurrency=3), tmp_path, workload=WORKLOAD) as handle,
    ):
        wait_for(handle, lambda s: s.completed >= 6, 15, "6 requests")
        handle.set_load(LoadTarget(concurrency=3, paused=True))
        _, snap, took = wait_for(handle, lambda s: s.in_flight == 0, 5, "pause drains")
        assert took < E2E_S * 2 + 0.5
        paused_done = snap.completed
        assert snap.levels[-1].ended_s is not None
        _, snap, _ = wait_for(handle, lambda s: s.completed >= paused_done, 1, "still paused")
        handle.set_load(LoadTarget(concurrency=3))
        wait_for(handle, lambda s: s.completed >= paused_done + 3, 10, "resumed")
        snap = handle.snapshot()
    assert [lv.value for lv in snap.levels] == [3.0, 3.0]
    assert snap.levels[1].started_s >= snap.levels[0].ended_s  # type: ignore[operator]
