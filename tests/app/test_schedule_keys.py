"""The live app's ``--schedule``: each recorded load change is set when the run reaches its time, and a load
key ends the schedule (the keys set the load again)."""

from __future__ import annotations

from dataclasses import replace

from tests.app.conftest import MakeApp, settle
from tests.support.fake_engine import FakeEngine
from tui.engine.config import LoadTarget


async def test_the_schedule_sets_each_target_at_its_time(make_app: MakeApp, engine: FakeEngine) -> None:
    steps = [(5.0, LoadTarget(concurrency=4)), (9.0, LoadTarget(concurrency=4, paused=True)),
             (12.0, LoadTarget(concurrency=8))]  # fmt: skip
    engine.snap = replace(engine.snap, elapsed_s=0.0)
    app = make_app(schedule=steps)
    async with app.run_test() as pilot:
        for elapsed_s, expected in ((4.9, []), (5.0, [steps[0][1]]), (10.0, [steps[0][1], steps[1][1]])):
            engine.snap = replace(engine.snap, elapsed_s=elapsed_s)
            app.poll()
            assert engine.loads == expected
        await pilot.press("up")  # a load key: the schedule ends here
        await settle(pilot)
        engine.snap = replace(engine.snap, elapsed_s=20.0)
        app.poll()
        assert steps[2][1] not in engine.loads and len(engine.loads) == 3
