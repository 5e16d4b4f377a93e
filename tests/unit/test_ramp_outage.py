"""The auto ramp across an outage: it holds while the server is away (however long: that time is not the
level's), never judges a level that held one (its failures are the outage's), and once the server is back
runs that load again as a fresh level, saying so. Before, the level's failures stopped the ramp at the hold
limit ("errors at 2 users"), or a level measured over an outage was taken for the plateau."""

from __future__ import annotations

from dataclasses import replace

from tests.integration.test_ramp import level, snap
from tui.app.autoload import AutoLoad
from tui.engine.config import LoadTarget
from tui.engine.control.ramp import GONE_GRACE_S, RampPolicy, RampStep
from tui.engine.snapshot import Outage


def test_the_ramp_holds_while_the_server_is_away_past_its_hold_limit() -> None:
    policy = RampPolicy(start=1, hold_limit_s=20.0)
    assert policy.step(snap([level(1, 1, 100.0)], 1)).target == LoadTarget(concurrency=2)
    # level 2 starts at 10 s; the server goes away at 12 s and is still away at 200 s: every request fails
    failing = level(2, 2, 0.0, steady=False, done=3, failed=300)
    down = replace(snap([level(1, 1, 100.0), failing], 2, elapsed=10.0))
    assert policy.step(down) == RampStep(None)
    away = replace(down, elapsed_s=200.0, outages=(Outage(12.0, None, "connect"),))
    assert policy.step(away) == RampStep(None)  # not "errors at 2 users": the outage is no verdict
    assert policy.waiting == "the server stopped answering at 00:12: 2 users held until it is back"


def test_a_level_that_held_an_outage_is_run_again_once_the_server_is_back_and_never_judged() -> None:
    policy = RampPolicy(start=1, hold_limit_s=20.0)
    first = level(1, 1, 100.0)
    policy.step(snap([first], 1))
    # the server was away 12-20 s of level 2: its window's figures are part outage (not steady, down_s)
    held = replace(level(2, 2, 40.0, steady=False, failed=30), down_s=8.0)
    back = replace(snap([first, held], 2, elapsed=30.0), outages=(Outage(12.0, 20.0, "connect"),))
    before = replace(back, elapsed_s=11.0, outages=(), levels=(first, replace(held, down_s=0.0)))
    assert policy.step(before) == RampStep(None)  # level 2 is the ramp's, still filling
    step = policy.step(back)
    assert step.again and step.target == LoadTarget(concurrency=2)
    assert step.reason == "the server is back: 2 users measured again (level 2 held the outage)"
    assert policy.waiting is None and policy.level_ids == [1]
    assert policy.step(back) == RampStep(None)  # a snapshot from before the new level: not again
    # level 3 at the same load, steady: the ramp goes on from it, level 2 left out of its knee
    again = level(3, 2, 190.0)
    step = policy.step(replace(back, level_id=3, levels=(first, held, again), elapsed_s=40.0))
    assert step.target == LoadTarget(concurrency=4) and not step.again
    assert policy.level_ids == [1, 3]


def test_the_app_runs_the_level_again_as_a_new_one_and_says_so() -> None:
    targets: list[LoadTarget] = []
    said: list[str] = []
    auto = AutoLoad(
        [],
        slo_ttft_ms=None,
        slo_tpot_ms=None,
        set_target=targets.append,
        notify=lambda message, **_: said.append(message),
        record_ramp=lambda verdict: None,
        on_result=lambda result: None,
    )
    auto.toggle_ramp(LoadTarget(concurrency=2))
    held = replace(level(1, 1, 40.0, steady=False, failed=30), down_s=8.0)
    away = replace(snap([held], 1, elapsed=20.0), outages=(Outage(12.0, None, "connect"),))
    auto.tick(away)
    assert auto.status() == "auto ramp: the server stopped answering at 00:12: 1 users held until it is back"
    auto.tick(replace(away, outages=(Outage(12.0, 18.0, "connect"),)))
    # paused, then the same load: the engine ends the level and starts a new one
    assert targets[-2:] == [LoadTarget(concurrency=1, paused=True), LoadTarget(concurrency=1)]
    assert said == ["auto ramp: the server is back: 1 users measured again (level 1 held the outage)"]
    assert auto.status() == "auto ramp: 1 users, holding until steady"


def test_a_level_whose_requests_just_broke_waits_to_see_whether_it_is_an_outage() -> None:
    """An outage is said only after its failures have gone on for a second: until then the level's broken
    and refused requests are not judged (before, "errors at 2 users" came before the outage could)."""
    policy = RampPolicy(start=1)
    first = level(1, 1, 100.0)
    policy.step(snap([first], 1))
    broken = replace(level(2, 2, 190.0, failed=7), errors=(("disconnect", 5), ("connect", 2)))
    at = snap([first, broken], 2, elapsed=20.0)
    assert policy.step(at) == RampStep(None)
    assert policy.step(replace(at, elapsed_s=20.0 + GONE_GRACE_S - 0.1)) == RampStep(None)
    # no outage came and no more failed: the failures are the level's own, judged as such
    step = policy.step(replace(at, elapsed_s=20.0 + GONE_GRACE_S))
    assert step.target is not None and step.target.paused and "errors at 2 users" in step.reason


def test_a_level_that_keeps_breaking_requests_is_judged_at_the_hold_limit() -> None:
    """Refused or broken requests that keep coming (a flaky proxy, no outage) hold the verdict only up to
    the hold limit, not for ever."""
    policy = RampPolicy(start=1, hold_limit_s=20.0)
    first = level(1, 1, 100.0)
    policy.step(snap([first], 1))
    at = snap([first, replace(level(2, 2, 190.0, failed=7), errors=(("disconnect", 7),))], 2, elapsed=10.0)
    assert policy.step(at) == RampStep(None)
    for t, broken in ((15.0, 9), (25.0, 11), (31.0, 12)):  # still growing at the last look
        flaky = replace(level(2, 2, 190.0, failed=broken), errors=(("disconnect", broken),))
        step = policy.step(replace(at, elapsed_s=t, levels=(first, flaky)))
    assert step.target is not None and step.target.paused and "errors at 2 users" in step.reason
