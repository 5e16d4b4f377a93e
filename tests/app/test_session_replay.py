"""A session recorded by the live app against the simulator, replayed with no server: the level table and
the percentiles the replay shows at a moment are the ones the live app showed at that moment."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.app.conftest import settle
from tests.support.engine_helpers import wait_for
from tui.app.app import TokentopApp
from tui.app.playback import make_replay_app
from tui.app.settings import AppSettings
from tui.app.themes import load_themes
from tui.app.widgets.server_pane import server_content
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.host.playback_engine import PlaybackEngine
from tui.engine.recording.file import read_session
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(120)


def _shown(app: TokentopApp) -> dict[str, Any]:
    """What the panes that carry figures show: every level-table cell and each histogram's percentiles."""
    return {
        "table": dict(app._table._shown),
        "ttft": app._ttft.header_lines().plain,
        "itl": app._itl.header_lines().plain,
        "completed": app._snap.completed if app._snap is not None else None,
        "server": server_content(app.engine.server_view(), app._snap).plain,
    }


def _differences(replayed: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """What differs, cell by cell for the table: (replayed, live)."""
    out: dict[str, Any] = {k: (replayed[k], live[k]) for k in live if k != "table" and replayed[k] != live[k]}
    table, live_table = replayed["table"], live["table"]
    for cell in sorted(set(table) | set(live_table)):
        if table.get(cell) != live_table.get(cell):
            out[f"table{cell}"] = (table.get(cell), live_table.get(cell))
    return out


def _live_moment(app: TokentopApp, handle: EngineHandle) -> tuple[dict[str, Any], float]:
    """What the live app shows, and the snapshot time it shows it for. The server pane is read after the
    snapshot, on the scraper's own schedule: a scrape published in between would be one the replay, at the
    snapshot's time, has not reached yet (seen once in a dozen runs). So again until none came meanwhile."""
    for _ in range(20):
        before = handle.server_view()
        app.poll(force=True)
        shown = _shown(app)
        if handle.server_view() is before and app._snap is not None:
            return shown, app._snap.elapsed_s
    raise AssertionError("a scrape landed during each of 20 reads of the panes")


async def test_a_replay_shows_the_figures_the_live_app_showed(tmp_path: Path) -> None:
    session_path = tmp_path / "run.tokentop-session.gz"
    options = EngineOptions(record=str(session_path), record_label="pilot")
    with SimServer("flat", time_scale=4.0) as sim:
        handle = EngineHandle(TargetConfig(base_url=sim.url), WorkloadConfig(isl=16, osl=24),
                              LoadTarget(concurrency=2), options=options)  # fmt: skip
        handle.start()
        try:
            assert handle.wait_ready(30.0)
            settings = AppSettings(themes=load_themes(), theme="dark", tick_s=3600.0, plot_thread=False)
            app = TokentopApp(handle, settings)
            async with app.run_test(size=(160, 48)) as pilot:
                wait_for(handle, lambda s: bool(s.levels) and s.levels[-1].steady, 40, "a steady level")
                await pilot.press("right_square_bracket")  # 4 users: a second level
                await settle(pilot)
                wait_for(handle, lambda s: len(s.levels) == 2 and s.levels[-1].steady, 40, "level 2 steady")
                handle.mark("second level")
                mid, mid_s = _live_moment(app, handle)
                handle.stop()
                app.poll(force=True)
                await settle(pilot)
                end = _shown(app)
                end_s = app._snap.elapsed_s if app._snap is not None else 0.0
        finally:
            handle.stop()
    assert handle.session_path == session_path
    session = read_session(session_path)
    assert not session.cut and session.header["label"] == "pilot"
    replay = PlaybackEngine(session)
    replay.pause()
    app = make_replay_app(replay, tick_s=3600.0, plot_thread=False)
    async with app.run_test(size=(160, 48)) as pilot:
        for at_s, live in ((end_s, end), (mid_s, mid)):  # backward too: the store is rebuilt
            replay.seek(replay.config.t0_ns + round(at_s * 1e9))
            app.poll(force=True)
            await settle(pilot)
            shown = _shown(app)
            assert shown == live, (at_s == end_s, _differences(shown, live))
        # the replay's keys: to the start, then to the next level, to the mark, and back a level
        replay.seek(replay.config.t0_ns)
        ((mark_ns, label),) = replay.marks
        _, (second_ns, second) = replay.level_starts
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert replay.now_ns() == second_ns and app._snap is not None and app._snap.level_id == second
        await pilot.press("n")
        await settle(pilot)
        assert replay.now_ns() == mark_ns and label == "second level"
        await pilot.press("right")
        await settle(pilot)
        assert replay.now_ns() == min(mark_ns + 10**10, replay.end_ns)
        await pilot.press("minus")
        assert replay.speed == 0.5
    assert len(end["table"]) > 10 and "p50" in end["ttft"] and "running" in end["server"]
    assert end["completed"] >= mid["completed"] > 0


def test_a_replay_clock_plays_at_its_speed() -> None:
    """The replay clock runs at the speed asked, on the wall clock given, and stops at the recording's end."""
    wall = [0]
    session = _tiny_session()
    replay = PlaybackEngine(session, wall_ns=lambda: wall[0])
    replay.start()
    replay.set_speed(4.0)
    wall[0] += 1_000_000_000
    assert replay.now_ns() == replay.config.t0_ns + 4_000_000_000
    replay.pause()
    wall[0] += 1_000_000_000
    assert replay.now_ns() == replay.config.t0_ns + 4_000_000_000
    replay.play()
    wall[0] += 10**12
    assert replay.now_ns() == replay.end_ns and not replay.playing
    assert time.perf_counter_ns() > 0


def test_views_are_replayed_at_the_moment_they_were_computed() -> None:
    """A view is written once computed, and a scrape stamped meanwhile, written first, moves its ``t`` later
    (a file's times never go back): the replay computes it at its ``at``, as live did (at ``t`` its rolling
    windows slid on: the replay's TTFT and ITL counts differed from the live app's)."""
    session = _tiny_session()
    t0, s = session.header["t0_ns"], 10**9
    session.events[:0] = [{"k": "v", "t": t0 + 5 * s, "at": t0 + 3 * s, "force": True}]
    replay = PlaybackEngine(session)
    replay.pause()
    replay.seek(t0 + 6 * s)
    assert replay.core.store.views.histograms_ns == t0 + 3 * s


@pytest.mark.parametrize("record_text", [False, True])
async def test_lanes_recorded_without_their_text_say_why_they_are_blank(record_text: bool) -> None:
    replay = PlaybackEngine(_tiny_session(EngineOptions(record_text=record_text)))
    app = make_replay_app(replay, tick_s=3600.0, plot_thread=False)
    async with app.run_test(size=(160, 48)) as pilot:
        app.poll(force=True)
        await settle(pilot)
        said = "recorded without --record-text" in str(app._lanes.border_subtitle)
        assert said is not record_text
        await pilot.press("p")  # frozen says so, and unfreezing brings the note back
        assert app._lanes.border_subtitle == "frozen: p resumes"
        await pilot.press("p")
        assert ("recorded without --record-text" in str(app._lanes.border_subtitle)) is not record_text


def _tiny_session(options: EngineOptions | None = None) -> Any:
    from tui.engine.recording.file import Session

    header = {"session": 1, "t0_ns": 10**9, "schema": {}, "config": {}}
    return _Stub(Session(Path("x"), header, [{"k": "end", "t": 10**9 + 20 * 10**9}], False), options)


class _Stub:
    def __new__(cls, session: Any, options: EngineOptions | None = None) -> Any:
        from tui.engine.recording.plain_json import Encoder

        enc = Encoder()
        session.header["config"] = {
            "target": enc.encode(TargetConfig(base_url="http://127.0.0.1:1/v1")),
            "workload": enc.encode(WorkloadConfig()),
            "load": enc.encode(LoadTarget()),
            "options": enc.encode(options or EngineOptions()),
            "workers": 1,
        }
        session.header["schema"] = enc.schema
        return session
