"""The live app against the simulator with answers longer than everything on screen (4000 tokens at
100 tok/s: 40 s each, longer than the 10 s views and the level): the histograms, the level row and the curve
fill from what arrives, while no request has finished. The real `TokentopApp` under Pilot, the real
`EngineHandle` (its worker in its own process)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.app.conftest import MakeApp
from tests.app.test_faults_live import flat, pane, until
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.sim.launch import SimServer

pytestmark = [pytest.mark.timeout(90), pytest.mark.timing]


@pytest.fixture
def engine() -> Iterator[EngineHandle]:
    """The real engine for `make_app` (overriding its fake one), against the simulator: 4 long answers."""
    with SimServer("flat", time_scale=2.0, metrics=False) as sim:
        target = TargetConfig(base_url=sim.start().url, timeout_s=60.0)
        handle = EngineHandle(
            target,
            WorkloadConfig(isl=32, osl=4000),
            LoadTarget(concurrency=4),
            options=EngineOptions(server_metrics=False),
        )
        handle.start()
        try:
            yield handle
        finally:
            handle.stop(finish_in_flight=False, timeout_s=2.0)


async def test_histograms_level_row_and_curve_fill_before_any_answer_ends(
    engine: EngineHandle, make_app: MakeApp
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        text, _ = await until(app, pilot, "ITL samples", lambda t: "p50" in pane(app, t, "#itl"), 20.0)
        assert "p50" in pane(app, text, "#ttft")
        text, _ = await until(
            app,
            pilot,
            "a curve point",
            lambda t: (
                "no load level measured yet" not in pane(app, t, "#curve")
                and re.search(r"4 users \d+\.\d ", pane(app, t, "#levels")) is not None
            ),
            25.0,
        )
        levels = pane(app, text, "#levels")
        assert engine.snapshot().completed == 0, "an answer finished: the test no longer shows what it means"
        curve = pane(app, text, "#curve")
    row = flat(levels)
    shown = re.search(r"4 users (\d+\.\d) ~?(\d+)\*?/~?(\d+)\*?/~?(\d+)\*? ", row)
    # tok/s and TTFT p50/90/99 filled (`~`: 4 first tokens bound none; `*`: a busy machine's lag is material)
    assert shown is not None, row
    assert float(shown.group(1)) == pytest.approx(400.0, rel=0.1)
    assert "4" in curve and "tok/s" in curve, curve
    lv = engine.snapshot().levels[-1]
    assert lv.measured_over == "arrivals" and lv.steady
