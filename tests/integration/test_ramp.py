"""The auto-ramp policy: pure decisions over synthetic snapshots, then one real ramp to the knee."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.engine_helpers import running_handle
from tui.engine.aggregate.metrics import find_knee
from tui.engine.aggregate.run_noise import wilson_interval
from tui.engine.config import LoadTarget, WorkloadConfig
from tui.engine.control.ramp import ARRIVALS_HOLD_S, RampPolicy, RampStep
from tui.engine.host.handle import EngineHandle
from tui.engine.snapshot import LevelView, SloView, Snapshot, Stats
from tui.sim.launch import SimServer


def level(
    level_id: int,
    users: int,
    tps: float,
    *,
    steady: bool = True,
    done: int | None = None,
    failed: int = 0,
    ttft_p99: float = 10.0,
    met: int | None = None,
) -> LevelView:
    done = max(50, 4 * users) if done is None else done
    s = Stats(n=done, p99=1.0)
    return LevelView(
        level_id=level_id,
        mode="concurrency",
        value=float(users),
        started_s=0.0,
        ended_s=None,
        steady_from_s=0.0,
        steady=steady,
        completed=done,
        failed=failed,
        output_tps=tps,
        request_per_s=1.0,
        per_request_tps=1.0,
        ttft=replace(s, p99=ttft_p99),
        tpot=s,
        itl_chunk=s,
        itl_e2e=s,
        e2el=s,
        tokens_per_chunk=1.0,
        sched_lag=Stats(),
        window_completed=done,
        window_failed=failed,
        slo=None if met is None else slo_of(met, done + failed, tps),
    )


def slo_of(met: int, requests: int, tps: float) -> SloView:
    low, high = wilson_interval(met, requests)
    return SloView(met, requests, 0, met / requests, low, high, 1.0, tps * met / requests)


def snap(levels: list[LevelView], users: int, elapsed: float = 10.0, fatal: str | None = None) -> Snapshot:
    return Snapshot(
        seq=1,
        elapsed_s=elapsed,
        base_url="u",
        model="m",
        endpoint="chat",
        demo=True,
        load=LoadTarget(concurrency=users),
        level_id=levels[-1].level_id if levels else 0,
        in_flight=users,
        completed=0,
        failed=0,
        output_tps=0.0,
        request_per_s=0.0,
        levels=tuple(levels),
        fatal=fatal,
    )


def settle(policy: RampPolicy, levels: list[LevelView], users: int) -> RampStep:
    """One step; when it decides to stop (the load paused, the level ended), the step once every level has
    settled, which quotes the knee and peak from them."""
    step = policy.step(snap(levels, users))
    if step.target is None or not step.target.paused:
        return step
    assert policy.stopping is not None and not step.done
    assert policy.step(snap(levels, users)) == RampStep(None), "quoted before its levels settled"
    levels[:] = [replace(lv, settled=True) for lv in levels]
    done = policy.step(snap(levels, users))
    assert done.done and done.verdict is not None
    return done


def run_curve(policy: RampPolicy, curve: Mapping[int, float], **kw: float) -> tuple[list[int], RampStep]:
    """Feed the policy a server whose steady throughput at N users is curve[N]; return the users tried."""
    target = policy.first(LoadTarget())
    levels: list[LevelView] = []
    tried = []
    for _ in range(20):
        users = target.concurrency
        tried.append(users)
        levels.append(level(len(levels) + 1, users, curve[users], **kw))  # type: ignore[arg-type]
        step = settle(policy, levels, users)
        if step.done:
            return tried, step
        assert step.target is not None
        target = step.target
    raise AssertionError("ramp did not stop")


def test_doubles_until_the_knee() -> None:
    curve = {1: 100, 2: 200, 4: 390, 8: 700, 16: 800, 32: 810, 64: 812}
    tried, step = run_curve(RampPolicy(), curve)
    assert tried == [1, 2, 4, 8, 16, 32]
    assert step.reason.startswith("knee at 16 users")


def test_stops_at_max_value_while_still_climbing() -> None:
    tried, step = run_curve(RampPolicy(max_value=8), {1: 1, 2: 2, 4: 4, 8: 8})
    assert tried == [1, 2, 4, 8] and "limit of 8" in step.reason


def test_with_an_slo_it_stops_at_the_first_level_whose_attainment_bound_misses_the_target() -> None:
    """Past the knee (flat from 4 users) while the attainment's lower bound meets 95 %; at 16 users 150 of
    200 met (Wilson: 69-80 %): the capacity is 8 users, quoted with its goodput."""
    policy = RampPolicy(slo_ttft_ms=5.0)
    target = policy.first(LoadTarget())
    met = {1: 200, 2: 200, 4: 199, 8: 198, 16: 150}
    levels: list[LevelView] = []
    for _ in range(10):
        users = target.concurrency
        levels.append(level(len(levels) + 1, users, min(users, 4) * 100.0, done=200, met=met[users]))
        step = settle(policy, levels, users)
        if step.done:
            break
        assert step.target is not None
        target = step.target
    assert [lv.value for lv in levels] == [1, 2, 4, 8, 16]
    assert step.verdict is not None and step.verdict.stopped_by == "slo"
    assert (
        step.reason
        == "capacity at SLO: 8 users, 396 tok/s (16 users: 75 % met, 95 % lower bound 69 % < 95 %)"
    )
    assert (step.verdict.capacity_value, step.verdict.capacity_level_id) == (8, 4)
    assert step.goal is not None and step.goal.concurrency == 8


def test_with_an_slo_a_level_is_held_until_its_interval_is_on_one_side_of_the_target() -> None:
    policy = RampPolicy(slo_e2e_ms=100.0, hold_limit_s=60.0)
    policy.first(LoadTarget())
    undecided = level(1, 1, 100, done=20, met=20)  # all met, but 20 requests bound it only to 84 %
    assert policy.step(snap([undecided], 1, elapsed=5.0)) == RampStep(None)
    decided = level(1, 1, 100, done=80, met=80)  # 80 of 80: the lower bound is 95.4 %
    assert policy.step(snap([decided], 1, elapsed=6.0)).target == LoadTarget(concurrency=2)


def test_stops_on_errors_and_on_fatal() -> None:
    tried, step = run_curve(RampPolicy(), {1: 1}, failed=10)
    assert tried == [1] and step.reason == "errors at 1 users: 10/60 failed"
    step = RampPolicy().step(snap([], 1, fatal="cannot connect"))
    assert step.done and "cannot connect" in step.reason


def test_holds_until_the_level_is_steady_with_enough_requests_or_the_hold_limit() -> None:
    policy = RampPolicy(hold_limit_s=30.0)
    policy.first(LoadTarget())
    assert policy.step(snap([level(1, 1, 100, steady=False)], 1, elapsed=1.0)) == RampStep(None)
    assert policy.step(snap([level(1, 1, 100, done=5)], 1, elapsed=2.0)) == RampStep(None)
    step = policy.step(snap([level(1, 1, 100, steady=False)], 1, elapsed=40.0))
    assert step.target is not None and step.target.concurrency == 2


def test_holds_a_level_of_answers_longer_than_it_for_its_arrivals_window_only() -> None:
    policy = RampPolicy(hold_limit_s=120.0)
    policy.first(LoadTarget())
    streaming = replace(level(1, 1, 100, done=0), measured_over="arrivals", window_s=2.0)
    assert policy.step(snap([streaming], 1, elapsed=3.0)) == RampStep(None)
    step = policy.step(snap([replace(streaming, window_s=ARRIVALS_HOLD_S)], 1, elapsed=6.0))
    assert step.target is not None and step.target.concurrency == 2, "held for a finished answer"


def test_ignores_snapshots_of_other_targets() -> None:
    policy = RampPolicy()
    policy.first(LoadTarget())
    assert policy.step(snap([level(1, 3, 100)], 3)) == RampStep(None)


@pytest.mark.timeout(60)
def test_ramps_a_traces_speed_until_the_knee() -> None:
    """In trace mode the ramp's value is the speed: x1, x2, x4, ... on the same timeline, until the knee."""
    curve = {1.0: 100, 2.0: 200, 4.0: 390, 8.0: 700, 16.0: 720, 32.0: 725}
    policy = RampPolicy(mode="trace")
    target = policy.first(LoadTarget(mode="trace", speed=0.5))
    levels: list[LevelView] = []
    tried = []
    for _ in range(10):
        assert target.mode == "trace" and not target.from_start
        tried.append(target.speed)
        levels.append(
            replace(level(len(levels) + 1, 1, curve[target.speed]), mode="trace", value=target.speed)
        )
        step = policy.step(replace(snap(levels, 1), load=target))
        if step.target is not None and step.target.paused:  # stopping: then quoted once settled
            levels = [replace(lv, settled=True) for lv in levels]
            step = policy.step(replace(snap(levels, 1), load=step.target))
        if step.done:
            break
        assert step.target is not None
        target = step.target
    assert tried == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert step.reason.startswith("knee at speed x8")


def test_a_client_limited_level_is_neither_the_knee_nor_its_plateau() -> None:
    """The throughput stops growing at 8 users because the client is saturated there, not the server: the
    ramp stops at 8 saying the client is the limit, and no knee is quoted from a plateau the client made."""
    policy = RampPolicy()
    levels: list[LevelView] = []
    tried, step = [], RampStep(None)
    target = policy.first(LoadTarget())
    curve = {1: 100, 2: 200, 4: 400, 8: 410, 16: 410}
    for _ in range(10):
        users = target.concurrency
        tried.append(users)
        levels.append(replace(level(len(levels) + 1, users, curve[users]), client_limited=users >= 8))
        step = settle(policy, levels, users)
        if step.done:
            break
        assert step.target is not None
        target = step.target
    assert tried == [1, 2, 4, 8]
    assert step.done and step.reason.startswith("client is the limit at 8 users"), step.reason
    assert "--workers" in step.reason
    assert find_knee(levels) is None  # 4 users is the best the server showed; nothing above it counts


@pytest.mark.timeout(90)
@pytest.mark.heavy
@pytest.mark.onecore
def test_a_slowed_client_stops_the_ramp_against_a_server_that_is_not_saturated(tmp_path: Path) -> None:
    """A worker whose loop is blocked 60 ms in every 100 ms (the engine's test hook) against the paced
    server, which streams every request at its own pace however many there are (never saturated): the
    ramp stops with the client as the limit, the results mark the level, and neither quotes a knee there."""
    import json
    import time

    from tui.engine.config import EngineOptions
    from tui.sim.paced import paced_server

    policy = RampPolicy(min_requests=6, max_value=64)
    options = EngineOptions(test_block_loop_ms=60.0)
    workload = WorkloadConfig(isl=16, osl=16)
    with (
        paced_server(400.0) as server,
        running_handle(
            server.url, policy.first(LoadTarget()), tmp_path, workload=workload, options=options
        ) as handle,
    ):
        deadline = time.monotonic() + 60
        step = RampStep(None)
        while time.monotonic() < deadline:
            step = policy.step(handle.snapshot())
            if step.done:
                break
            if step.target is not None:
                handle.set_load(step.target)
            time.sleep(0.1)  # the face's tick
        snap_at_stop = handle.snapshot()
        handle.write_results(tmp_path / "results.json")
    results = json.loads((tmp_path / "results.json").read_text())
    assert step.done, "ramp did not finish in time"
    assert step.reason.startswith("client is the limit at "), step.reason
    assert "--workers" in step.reason
    limited = {lv.level_id for lv in snap_at_stop.levels if lv.client_limited}
    assert snap_at_stop.level_id in limited
    assert snap_at_stop.knee is None or snap_at_stop.knee.level_id not in limited
    saved = {lv["level_id"]: lv for lv in results["levels"]}
    assert all(saved[i]["client_saturated"] for i in limited)
    knee = results["saturation"]["knee"]
    assert knee is None or knee["level_id"] not in limited
    assert [n for n in results["notices"] if "client is the limit" in n and "--workers" in n]


def test_a_stop_ends_the_level_and_quotes_the_settled_figures() -> None:
    """At 8 users the knee shows at 4; the ramp pauses the load there (ending the 8-user level), holds
    until its levels have settled, and quotes what they say then (8 users read 405 tok/s once its last
    requests were in): the figures the saved levels hold. The load is left paused at the knee."""
    policy = RampPolicy()
    levels: list[LevelView] = []
    target = policy.first(LoadTarget())
    curve = {1: 100, 2: 200, 4: 390, 8: 400}
    for _ in range(3):
        levels.append(level(len(levels) + 1, target.concurrency, curve[target.concurrency]))
        step = policy.step(snap(levels, target.concurrency))
        assert step.target is not None and not step.done
        target = step.target
    levels.append(level(4, 8, curve[8]))
    stop = policy.step(snap(levels, 8))
    assert stop.target == LoadTarget(concurrency=8, paused=True) and not stop.done
    assert policy.stopping == "knee at 4 users: 390 of a 400 tok/s peak"
    assert policy.step(snap(levels, 8)) == RampStep(None)  # its last requests are still out
    levels = [replace(lv, settled=True) for lv in levels[:3]] + [
        replace(levels[3], output_tps=405.0, settled=True)
    ]
    done = policy.step(snap(levels, 8))
    assert done.done and done.reason == "knee at 4 users: 390 of a 405 tok/s peak"
    assert done.target == LoadTarget(concurrency=4, paused=True) and done.goal == LoadTarget(concurrency=4)
    verdict = done.verdict
    assert verdict is not None and verdict.settled and verdict.stopped_by == "knee"
    assert verdict.knee == find_knee(levels) and verdict.level_ids == (1, 2, 3, 4)
    assert (verdict.peak_tps, verdict.peak_level_id, verdict.stopped_at_level_id) == (405.0, 4, 4)


def test_a_stop_quotes_unsettled_figures_after_the_settle_limit() -> None:
    policy = RampPolicy(settle_limit_s=5.0)
    policy.first(LoadTarget())
    stop = policy.step(snap([level(1, 1, 100, failed=10)], 1, elapsed=10.0))
    assert stop.target is not None and stop.target.paused
    assert policy.step(snap([level(1, 1, 100, failed=10)], 1, elapsed=14.0)) == RampStep(None)
    done = policy.step(snap([level(1, 1, 100, failed=10)], 1, elapsed=15.5))
    assert done.done and done.verdict is not None and not done.verdict.settled
    assert done.reason == "errors at 1 users: 10/60 failed" and done.goal is None and done.target is None


def drive(policy: RampPolicy, handle: EngineHandle, timeout_s: float) -> RampStep:
    """Tick the ramp as the app does (every 0.1 s): set each target; at the stop, leave the load where the
    ramp parks it and record its verdict."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        step = policy.step(handle.snapshot())
        if step.target is not None:
            handle.set_load(step.target)
        if step.done:
            assert step.verdict is not None
            handle.record_ramp(step.verdict)
            return step
        time.sleep(0.1)
    raise AssertionError("ramp did not finish in time")


@pytest.mark.timeout(60)
def test_the_saved_knee_and_peak_are_the_ones_the_ramp_quoted(tmp_path: Path) -> None:
    """A real ramp to the simulator's knee (tiny-cpu: 4 slots): after the stop the load is paused and the
    saved results, written a while later, hold the knee, peak and level figures the ramp quoted, and its
    verdict. Whichever the ramp finds on a busy machine (the knee at 4 or 8 users, or the client the limit
    first), the saved results must say what it quoted: so not a heavy test (five runs in five with three
    cores' worth kept busy)."""
    sim = SimServer("tiny-cpu", time_scale=20.0)
    policy = RampPolicy(min_requests=8)
    with (
        sim,
        running_handle(
            sim.start().url, policy.first(LoadTarget()), tmp_path, workload=WorkloadConfig(isl=32, osl=16)
        ) as handle,
    ):
        step = drive(policy, handle, 45)
        assert handle.load.paused and not handle.snapshot().in_flight
        time.sleep(0.5)  # a level still running would move its figures meanwhile
        handle.write_results(tmp_path / "results.json")
    verdict = step.verdict
    assert verdict is not None and verdict.settled and handle.ramp == verdict
    results = json.loads((tmp_path / "results.json").read_text())
    saved = {lv["level_id"]: lv for lv in results["levels"]}
    assert f"auto ramp stopped: {step.reason}" in results["notices"]
    ramp = results["ramp"]
    assert (ramp["stopped_by"], ramp["reason"], ramp["settled"]) == (verdict.stopped_by, step.reason, True)
    assert ramp["level_ids"] == list(verdict.level_ids) == sorted(saved)
    assert (
        ramp["peak_output_throughput"] == verdict.peak_tps == results["saturation"]["peak_output_throughput"]
    )
    assert saved[ramp["peak_level_id"]]["output_throughput"] == verdict.peak_tps
    if verdict.knee is None:  # a machine so busy that the client was the limit first: no knee either side
        assert verdict.stopped_by == "client" and results["saturation"]["knee"] is None, step.reason
        return
    assert step.reason.startswith(("knee at 4 users", "knee at 8 users")), step.reason
    knee = results["saturation"]["knee"]
    assert knee == ramp["knee"]
    assert (knee["level_id"], knee["output_throughput"]) == (verdict.knee.level_id, verdict.knee.output_tps)
    assert knee["peak_output_throughput"] == verdict.knee.peak_tps
    assert saved[knee["level_id"]]["output_throughput"] == verdict.knee.output_tps
    assert f"{verdict.knee.output_tps:,.0f} of a {verdict.knee.peak_tps:,.0f} tok/s peak" in step.reason
