"""The live app while the server goes away and comes back on its port: the status bar says when it stopped
answering and when it was back, the errors pane has both lines, and the server pane names the outage, not
a proxy. The real `TokentopApp` under Pilot, the real `EngineHandle` (its worker in its own process)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.app.conftest import MakeApp
from tests.app.test_faults_live import flat, pane, until
from tests.support.ports import free_port, sim_on_port
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def sim() -> Iterator[list[SimServer]]:
    """The simulator on a fixed port (a list: the test replaces it with its restart)."""
    servers = [sim_on_port(free_port()).start()]
    try:
        yield servers
    finally:
        servers[-1].stop()


@pytest.fixture
def engine(sim: list[SimServer]) -> Iterator[EngineHandle]:
    handle = EngineHandle(
        TargetConfig(base_url=sim[0].url, timeout_s=30.0),
        WorkloadConfig(isl=32, osl=32),
        LoadTarget(concurrency=4),
        options=EngineOptions(),
    )
    handle.start()
    try:
        yield handle
    finally:
        handle.stop(finish_in_flight=False, timeout_s=2.0)


async def test_the_app_says_the_server_stopped_answering_and_when_it_was_back(
    sim: list[SimServer], engine: EngineHandle, make_app: MakeApp
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await until(app, pilot, "completions", lambda t: engine.snapshot().completed >= 12, 40.0)
        sim[0].stop()
        down, _ = await until(
            app,
            pilot,
            "the outage in the status bar and the server pane",
            lambda t: "stopped answering at" in t and "stopped answering;" in flat(pane(app, t, "#server")),
            15.0,
        )
        port = sim[0].port
        sim.append(sim_on_port(port).start())
        back, _ = await until(app, pilot, "the server back", lambda t: "back at" in t, 20.0)
        shown = flat(back)
        snap = engine.snapshot()
    (outage,) = snap.outages
    assert outage.end_s is not None and outage.end_s > outage.start_s
    assert "⚠ the server stopped answering at" in flat(down)
    assert "the server is back at" in shown  # the errors pane's line
    assert "proxy" not in flat(down) + shown
    level = snap.levels[-1]
    assert not level.steady and level.down_s > 0
