"""The live app's auto ramp while the server restarts: the simulator stopped and started again on its port
under the real `TokentopApp` (Pilot) and the real `EngineHandle`. The ramp holds while the server is away
and says so, runs the level that held the outage again once it is back, and goes on to the next load; the
requests cut are counted by class, the server view sees its counters' reset (no negative rate, no spike),
and the results and the session keep what was measured."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.conftest import MakeApp
from tests.app.test_faults_live import flat, until
from tests.support.ports import free_port, sim_on_port
from tui.app.app import TokentopApp
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.host.playback_engine import PlaybackEngine
from tui.engine.recording.file import read_session
from tui.engine.results.files import to_json
from tui.sim.launch import SimServer

# timing: on a loaded machine (the first pass's six processes) a 1-user level read as the client's limit and
# the ramp stopped there, before the outage it is here to see
pytestmark = [pytest.mark.timeout(150), pytest.mark.timing]


def _said(app: TokentopApp) -> str:
    """The app's notifications so far (toasts: the screen shows them briefly, wrapped)."""
    return " ".join(str(n.message) for n in app._notifications)


@pytest.fixture
def sim() -> Iterator[list[SimServer]]:
    """The simulator on a fixed port (a list: the test appends its restart)."""
    servers = [sim_on_port(free_port()).start()]
    try:
        yield servers
    finally:
        servers[-1].stop()


@pytest.fixture
def engine(sim: list[SimServer], tmp_path: Path) -> Iterator[EngineHandle]:
    handle = EngineHandle(
        TargetConfig(base_url=sim[0].url, timeout_s=30.0),
        WorkloadConfig(isl=16, osl=32),
        LoadTarget(concurrency=1),
        options=EngineOptions(record=str(tmp_path / "run.tokentop-session.gz")),
    )
    handle.start()
    try:
        yield handle
    finally:
        handle.stop(finish_in_flight=False, timeout_s=2.0)


async def test_the_ramp_holds_through_a_restart_runs_its_level_again_and_goes_on(
    sim: list[SimServer], engine: EngineHandle, make_app: MakeApp
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await until(app, pilot, "the engine", lambda t: engine.snapshot().completed >= 1, 40.0)
        await pilot.press("a")
        await until(app, pilot, "the ramp at 2 users", lambda t: "auto ramp: 2 users" in flat(t), 60.0)
        sim[0].stop()  # at once (level 2 needs seconds): its streams break, the next connections are refused
        held, _ = await until(
            app,
            pilot,
            "the ramp held for the outage",
            lambda t: "2 users held until it is back" in flat(t),
            20.0,
        )
        before = engine.snapshot()
        sim.append(sim_on_port(sim[0].port).start())
        await until(app, pilot, "the server back", lambda t: "back at" in flat(t), 20.0)
        await until(app, pilot, "the level run again", lambda t: "2 users measured again" in _said(app), 30.0)
        await until(app, pilot, "the ramp going on", lambda t: engine.snapshot().levels[-1].value == 4, 60.0)
        ramp = app.auto_load.ramp
        assert ramp is not None
        level_ids = list(ramp.level_ids)
        snap = engine.snapshot()
        view = engine.core.scrape.latest()
    assert "⚠ the server stopped answering at" in flat(held)
    # the level that held the outage: not steady, its down-time counted, and not among the ramp's levels
    (outage,) = snap.outages
    assert outage.end_s is not None and outage.end_s > outage.start_s
    (held_level,) = [lv for lv in snap.levels if lv.down_s > 0]
    assert held_level.value == 2 and not held_level.steady and held_level.level_id not in level_ids
    again = [lv for lv in snap.levels if lv.value == 2 and lv.level_id > held_level.level_id]
    assert again and again[0].level_id in level_ids and again[0].steady
    # the requests cut: counted and classed (broken streams, refused connections), none lost
    errors = dict(snap.errors)
    assert set(errors) == {"connect", "disconnect"}, errors  # 2 users' streams broke: at least one
    assert snap.failed == sum(errors.values()) >= before.failed
    assert snap.completed > before.completed  # the run went on
    # the server view saw its counters go back to zero: a restart, no negative rate, no spike
    assert view is not None and view.resets >= 1
    rates = [v for _, v in view.history("generation_tok_s")]
    assert rates and min(rates) >= 0 and all(math.isfinite(v) for v in rates), rates
    assert view.reset_t_ns is not None
    up_to_reset = [v for t, v in view.history("generation_tok_s") if t < view.reset_t_ns]
    assert max(rates) <= 3 * max(up_to_reset), (max(rates), max(up_to_reset))
    # the results and the session keep all of it
    engine.stop(finish_in_flight=False, timeout_s=2.0)
    results = json.loads(json.dumps(to_json(engine.results())))
    assert [o["cause"] for o in results["outages"]] == [outage.cause]
    assert results["server"]["restarts"] >= 1
    saved = {lv["level_id"]: lv for lv in results["levels"]}
    assert saved[held_level.level_id]["server_down_s"] > 0
    totals = results["totals"]
    assert totals["completed"] >= snap.completed and all(totals["errors"][k] >= n for k, n in errors.items())
    path = engine.session_path
    assert path is not None
    replayed = json.loads(json.dumps(to_json(PlaybackEngine(read_session(path)).run_to_end().results())))
    assert replayed["outages"] == results["outages"] and replayed["totals"] == results["totals"]
    assert [lv["completed"] for lv in replayed["levels"]] == [lv["completed"] for lv in results["levels"]]
