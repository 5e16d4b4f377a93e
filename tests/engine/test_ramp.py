"""The auto-ramp policy: pure decisions over synthetic snapshots, then one real ramp to the knee."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from tests.engine.engine_helpers import running_handle
from tui.engine.config import LoadTarget, WorkloadConfig
from tui.engine.control.ramp import ARRIVALS_HOLD_S, RampPolicy, RampStep
from tui.engine.snapshot import LevelView, Snapshot, Stats
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
    )


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


def run_curve(policy: RampPolicy, curve: Mapping[int, float], **kw: float) -> tuple[list[int], RampStep]:
    """Feed the policy a server whose steady throughput at N users is curve[N]; return the users tried."""
    target = policy.first(LoadTarget())
    levels: list[LevelView] = []
    tried = []
    for _ in range(20):
        users = target.concurrency
        tried.append(users)
        levels.append(level(len(levels) + 1, users, curve[users], **kw))  # type: ignore[arg-type]
        step = policy.step(snap(levels, users))
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


def test_stops_at_an_slo_breach() -> None:
    policy = RampPolicy(slo_ttft_ms=5.0)
    tried, step = run_curve(policy, {1: 1, 2: 2}, ttft_p99=9.0)
    assert tried == [1] and step.reason == "SLO broken at 1 users: TTFT p99 9 ms > 5 ms"


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
@pytest.mark.heavy
def test_real_ramp_stops_at_the_simulators_knee(tmp_path: Path) -> None:
    # tiny-cpu has 4 slots: throughput stops growing at 4 users
    sim = SimServer("tiny-cpu", time_scale=10.0)
    policy = RampPolicy(min_requests=8)
    workload = WorkloadConfig(isl=32, osl=16)
    with (
        sim,
        running_handle(sim.start().url, policy.first(LoadTarget()), tmp_path, workload=workload) as handle,
    ):
        import time

        deadline = time.monotonic() + 45
        step = RampStep(None)
        while time.monotonic() < deadline:
            step = policy.step(handle.snapshot())
            if step.done:
                break
            if step.target is not None:
                handle.set_load(step.target)
            time.sleep(0.1)  # the face's tick
    assert step.done, "ramp did not finish in time"
    assert step.reason.startswith(("knee at 4 users", "knee at 8 users")), step.reason


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
        if step.done:
            break
        assert step.target is not None
        target = step.target
    assert tried == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert step.reason.startswith("knee at speed x8")
