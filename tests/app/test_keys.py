"""Pilot tests: keys become load targets on the engine, and view keys change what the panes name. The tests
that only press keys and read the screen share one app (`shared`); those that quit it or start it with
their own options make their own."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from tests.app.conftest import ON_SHARED_APP, MakeApp, Shared, screen_text, settle
from tests.support import frozen
from tests.support.fake_engine import FakeEngine
from tui.app.widgets.detail import RequestDetailScreen
from tui.app.widgets.help import HelpBody, HelpScreen
from tui.app.widgets.latency import LatencyHistogram
from tui.app.widgets.level_table import LevelTable
from tui.app.widgets.streams import StreamLanes
from tui.engine.snapshot import ITL_NAMES, ClientHealth, LevelView

pytestmark = ON_SHARED_APP


async def test_plus_three_times_adds_three_users(shared: Shared) -> None:
    pilot, engine = shared.pilot, shared.engine
    await pilot.press("+", "+", "+")
    assert [t.concurrency for t in engine.loads] == [9, 10, 11]
    await pilot.press("-", "down", "up")
    assert engine.load.concurrency == 10


async def test_brackets_double_and_halve(shared: Shared) -> None:
    pilot, engine = shared.pilot, shared.engine
    await pilot.press("]")
    assert engine.load.concurrency == 16
    await pilot.press("[", "[")
    assert engine.load.concurrency == 4


async def test_m_switches_to_rate_and_plus_moves_the_rate(shared: Shared) -> None:
    pilot, engine = shared.pilot, shared.engine
    await pilot.press("m")
    assert engine.load.mode == "rate"
    # Rate mode starts at the measured request rate (1.55/s in the frozen snapshot) on a 0.5/s grid.
    assert engine.load.rate == 1.5
    await pilot.press("+")
    assert engine.load.rate == 2.0
    await pilot.press("]")
    assert engine.load.rate == 4.0
    await pilot.press("m")
    back = engine.loads[-1]
    assert back.mode == "concurrency" and back.concurrency == 8


async def test_space_pauses_and_resumes(shared: Shared) -> None:
    app, pilot, engine = shared.app, shared.pilot, shared.engine
    await pilot.press("space")
    assert engine.load.paused
    app.poll(force=True)
    assert "paused" in app._status.plain
    await pilot.press("space")
    assert not engine.load.paused


@pytest.mark.app_size(160, 50)
async def test_i_and_w_change_the_named_convention_and_window(shared: Shared) -> None:
    app, pilot = shared.app, shared.pilot
    itl = app.query_one("#itl", LatencyHistogram)
    ttft = app.query_one("#ttft", LatencyHistogram)
    assert ITL_NAMES["chunk"] in str(itl.border_title)
    assert "last 10 s" in str(ttft.border_title)
    await pilot.press("i")
    await settle(pilot)
    assert ITL_NAMES["tpot"] in str(itl.border_title)
    assert ITL_NAMES["tpot"] in str(app.query_one(LevelTable).border_title)
    await pilot.press("w", "w", "w")
    assert "whole run" in str(ttft.border_title)
    assert "whole run" in str(itl.border_title)
    await pilot.press("i", "i", "w")  # round both back to the first
    assert ITL_NAMES["chunk"] in str(itl.border_title) and "last 10 s" in str(ttft.border_title)


async def test_t_cycles_the_themes(shared: Shared) -> None:
    app, pilot = shared.app, shared.pilot
    assert app.theme == "dark"
    await pilot.press("t")
    assert app.theme == "high-contrast"
    await pilot.press("t", "t")
    assert app.theme == "dark"


async def test_s_saves_results_log_and_screenshot(
    make_app: MakeApp, engine: FakeEngine, tmp_path: Path
) -> None:
    log = tmp_path / "requests.jsonl"
    log.write_text('{"id": 1}\n')
    out = tmp_path / "saved"
    app = make_app(save_dir=out, requests_log=log)
    async with app.run_test() as pilot:
        await pilot.press("s")
        await settle(pilot)
    names = sorted(p.suffix for p in out.iterdir() if p.is_file())
    assert names == [".csv", ".json", ".jsonl", ".svg", ".svg"]  # the screen, and the report plot
    assert engine.results and engine.results[0].parent == out
    # the exports beside the results: the level table, and one vLLM-shaped file per level
    base = engine.results[0].with_suffix("")
    assert base.with_suffix(".csv").read_text().startswith("level_id,")
    vllm_files = sorted(base.with_name(base.name + "-vllm").glob("*.json"))
    assert len(vllm_files) == len(engine.snap.levels) > 0
    assert all(svg.read_text().startswith("<svg") for svg in out.glob("*.svg"))
    assert base.with_name(base.name + "-plot.svg").exists()


async def test_a_second_s_leaves_the_first_saves_toast_out_of_its_screenshot(
    make_app: MakeApp, engine: FakeEngine, tmp_path: Path
) -> None:
    out = tmp_path / "saved"
    app = make_app(save_dir=out)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:  # toasts drawn, as in a terminal
        await pilot.press("s")
        await settle(pilot)
        assert engine.results[0].stem in screen_text(app)  # the first save's toast is up
        await pilot.press("s")
        await settle(pilot)
    first, second = engine.results
    shot = second.with_suffix(".svg").read_text()
    assert shot.startswith("<svg") and "token&#160;streams" in shot  # the screen itself
    assert first.stem not in shot  # the toast naming the first save's files is not in the picture
    assert any(second.stem in n.message for n in app._notifications)  # the second save still says so


@pytest.mark.app_size(100, 40)
async def test_question_mark_opens_help_with_metric_definitions(shared: Shared) -> None:
    app, pilot = shared.app, shared.pilot
    await pilot.press("question_mark")
    await settle(pilot)
    assert isinstance(app.screen, HelpScreen)
    from tui.app.widgets.help import KEYS_MD, METRICS_MD

    for word in (
        "TTFT",
        "scheduling lag",
        "ISL / OSL",
        "usage",
        "E2E",
        "TPS",
        "`tpot`",
        "`chunk`",
        "`e2e`",
    ):
        assert word in METRICS_MD
    for key in (
        "`+`",
        "`]`",
        "`m`",
        "`space`",
        "`a`",
        "`k`",
        "`i`",
        "`w`",
        "`t`",
        "`s`",
        "`p`",
        "`?`",
        "`q`",
    ):
        assert key in KEYS_MD
    await pilot.press("escape")
    assert not isinstance(app.screen, HelpScreen)


@pytest.mark.app_size(80, 24)
async def test_help_scrolls_at_once_with_the_usual_keys(shared: Shared) -> None:
    app, pilot, engine = shared.app, shared.pilot, shared.engine
    await pilot.press("question_mark")
    await settle(pilot)
    body = app.screen.query_one(HelpBody)
    assert app.focused is body  # no tab needed
    assert "metric definitions" in screen_text(app)  # the top says where they are
    await pilot.press("down", "down")
    assert body.scroll_y == 2
    await pilot.press("up")
    assert body.scroll_y == 1
    await pilot.press("space")
    await pilot.press("pagedown")
    paged = body.scroll_y
    assert paged > 2 * (body.scrollable_content_region.height - 2)
    await pilot.press("pageup")
    assert 0 < body.scroll_y < paged
    await pilot.press("end")
    assert body.scroll_y == body.max_scroll_y > 0
    await pilot.press("home")
    assert body.scroll_y == 0
    await pilot.press("d")
    await settle(pilot)
    assert "What the numbers mean" in screen_text(app).splitlines()[2]  # the body's first row
    assert engine.loads == []  # up/down scrolled the help, not the load
    await pilot.press("escape")


async def test_help_opened_again_is_the_same_screen_from_the_top_with_the_newest_health(
    shared: Shared,
) -> None:
    """The app builds the help once (building it was most of what `?` cost) and shows it again after: it must
    not come back scrolled where it was left, nor with the client health of the first opening."""
    app, pilot, engine = shared.app, shared.pilot, shared.engine
    await pilot.press("question_mark")
    await settle(pilot)
    first = app.screen
    assert isinstance(first, HelpScreen) and "1 worker," in screen_text(app)
    await pilot.press("end")
    assert first.query_one(HelpBody).scroll_y > 0
    await pilot.press("escape")
    await settle(pilot)
    engine.snap = replace(engine.snap, health=ClientHealth(workers=3, loop_lag_p99_ms=1.5, cpu_share=0.2))
    app.poll(force=True)
    await pilot.press("question_mark")
    await settle(pilot)
    assert app.screen is first
    assert first.query_one(HelpBody).scroll_y == 0
    assert "3 workers" in screen_text(app) and "1 worker," not in screen_text(app)
    await pilot.press("escape")
    assert not isinstance(app.screen, HelpScreen)


async def test_q_stops_the_engine_writes_output_and_exits_zero(
    make_app: MakeApp, engine: FakeEngine, tmp_path: Path
) -> None:
    output = tmp_path / "results.json"
    app = make_app(output=output)
    async with app.run_test() as pilot:
        await pilot.press("q")
        await settle(pilot)
    assert engine.stopped == 1
    assert output.exists()
    assert app.return_value == 0
    assert app.quit_notes == [f"results written to {output}"]


async def test_q_without_output_keeps_the_results_in_the_state_directory(
    make_app: MakeApp, engine: FakeEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    app = make_app()
    async with app.run_test() as pilot:
        app.poll(force=True)
        await pilot.press("q")
        await settle(pilot)
    kept = list((tmp_path / "state" / "tokentop" / "results").glob("tokentop-*.json"))
    assert len(kept) == 1 and engine.results == kept
    assert orjson.loads(kept[0].read_bytes())["interrupted_by"] == "quit"
    assert app.quit_notes == [f"results kept in {kept[0]}"]  # said once, on exit


async def test_q_after_the_engine_stopped_on_a_fatal_error_exits_one(
    make_app: MakeApp, engine: FakeEngine, tmp_path: Path
) -> None:
    engine.snap = replace(engine.snap, fatal="401 Unauthorized: the API key was rejected")
    app = make_app(output=tmp_path / "results.json")
    async with app.run_test() as pilot:
        app.poll(force=True)
        await pilot.press("q")
        await settle(pilot)
    assert app.return_value == 1
    assert (tmp_path / "results.json").exists()


async def test_a_starts_a_ramp_at_one_user_and_a_load_key_stops_it(shared: Shared) -> None:
    app, pilot, engine = shared.app, shared.pilot, shared.engine
    await pilot.press("a")
    assert engine.load.concurrency == 1 and engine.load.mode == "concurrency"
    assert "auto ramp" in app._status.plain
    await pilot.press("+")
    assert app.auto_load.ramp is None
    assert engine.load.concurrency == 2


async def test_the_ramp_doubles_once_a_level_is_steady_and_stops_at_the_knee(shared: Shared) -> None:
    from dataclasses import replace

    from tui.engine.config import LoadTarget

    def at(users: int, level_id: int, tps: float) -> LevelView:
        level = replace(frozen.LEVELS[0], level_id=level_id, value=float(users), output_tps=tps)
        return replace(level, steady=True, ended_s=None, window_completed=40, window_failed=0)

    app, pilot, engine = shared.app, shared.pilot, shared.engine
    await pilot.press("a")
    assert engine.load == LoadTarget(concurrency=1)
    one = at(1, 5, 48.0)
    engine.snap = replace(engine.snap, seq=50, level_id=5, levels=(one,), knee=None, elapsed_s=50.0)
    app.poll()
    assert engine.load.concurrency == 2 and app.auto_load.ramp is not None
    two = replace(at(2, 6, 49.0), per_request_tps=24.5)
    engine.snap = replace(
        engine.snap, seq=51, level_id=6, levels=(replace(one, ended_s=60.0), two), elapsed_s=70.0
    )
    app.poll()  # no gain from doubling: the knee is at 1 user; the 2-user level ends first
    assert engine.load == LoadTarget(concurrency=2, paused=True) and app.auto_load.ramp is not None
    assert "auto ramp stopping: knee at 1 users · settling" in app._status.plain
    settled = (replace(one, ended_s=60.0, settled=True), replace(two, ended_s=71.0, settled=True))
    engine.snap = replace(engine.snap, seq=52, levels=settled, elapsed_s=72.0)
    app.poll()
    assert app.auto_load.ramp is None
    assert engine.load == LoadTarget(concurrency=1, paused=True)  # space resumes at the knee
    (verdict,) = engine.ramps  # what the status bar says is what the results will record
    assert verdict.reason == "knee at 1 users: 48 of a 49 tok/s peak" and verdict.knee is not None
    assert (verdict.knee.level_id, verdict.peak_tps, verdict.level_ids) == (5, 49.0, (5, 6))
    # The result stays on screen, not only in a toast: why it stopped, and the key back to the knee.
    assert "auto ramp stopped: knee at 1 users · k → 1 users" in app._status.plain
    assert "knee at 1 users: 48 of a 49 tok/s peak" in str(app._curve.border_subtitle)
    assert "k → 1 users" in str(app._curve.border_subtitle)
    for _ in range(50):  # the footer redraws on a later refresh (a busy machine: more than one pause)
        await pilot.pause()
        if "k knee" in screen_text(app).splitlines()[-1]:
            break
    assert "k knee" in screen_text(app).splitlines()[-1]
    app.poll()  # the next ticks keep it
    assert "auto ramp stopped" in app._status.plain
    await pilot.press("k")
    assert engine.load == LoadTarget(concurrency=1)
    assert "ramp" not in app._status.plain  # a load change ends the result
    assert not app._curve.border_subtitle


@pytest.mark.app_size(160, 50)
async def test_k_sets_the_measured_knee_is_offered_only_with_one_and_says_when_none(shared: Shared) -> None:
    from dataclasses import replace

    app, pilot, engine = shared.app, shared.pilot, shared.engine
    await settle(pilot)
    assert "k knee" in screen_text(app).splitlines()[-1]
    await pilot.press("k")
    assert engine.load.concurrency == 4  # the frozen snapshot's knee
    engine.snap = replace(engine.snap, seq=43, knee=None)
    app.poll()
    await settle(pilot)
    assert "k knee" not in screen_text(app).splitlines()[-1]
    await pilot.press("k")
    assert engine.loads[-1].concurrency == 4  # nothing to go back to: no change
    # ...and pressed anyway, `k` says why rather than nothing
    assert "no knee measured yet: `a` ramps the load until it finds one" in [
        n.message for n in app._notifications
    ]


async def test_p_freezes_the_lane_text(shared: Shared) -> None:
    from dataclasses import replace

    app, pilot, engine = shared.app, shared.pilot, shared.engine
    await pilot.press("p")
    lanes = app.query_one(StreamLanes)
    assert lanes.frozen
    before = lanes._lanes
    engine.snap = replace(engine.snap, seq=43, lanes=engine.snap.lanes[:1])
    app.poll()
    assert lanes._lanes == before
    await pilot.press("p")
    app.poll(force=True)
    assert len(lanes._lanes) == 1


@pytest.mark.app_size(120, 40)
async def test_tab_enter_opens_the_request_detail(shared: Shared) -> None:
    app, pilot = shared.app, shared.pilot
    await settle(pilot)
    assert " 8 users " in screen_text(app)  # the level table's name for the lanes' level (id 4)
    await pilot.press("tab")
    assert app.focused is app.query_one(StreamLanes)
    await pilot.press("down", "enter")
    await settle(pilot)
    assert isinstance(app.screen, RequestDetailScreen)
    assert app.screen.request_id == 302
    summary = str(app.screen.query_one("#detail-summary").render())
    assert "TTFT" in summary and "388ms" in summary
    # its level named as the level table names it (the table shows no level ids)
    assert "level 8 users" in summary and "level 4" not in summary
    await pilot.press("escape")
    await settle(pilot)
    assert not isinstance(app.screen, RequestDetailScreen)
    app.set_focus(None)  # out of the lanes, so up/down are the load's again


async def test_the_command_palette_offers_the_actions(shared: Shared) -> None:
    app, engine = shared.app, shared.engine
    commands = {command.title: command for command in app.get_system_commands(app.screen)}
    wanted = {
        "More load",
        "Double load",
        "Switch mode",
        "Auto ramp",
        "Save",
        "Next theme",
        "Help",
        "Quit",
    }
    assert wanted <= set(commands)
    await commands["Double load"].callback()
    assert engine.load.concurrency == 16


@pytest.mark.app_size(100, 40)
async def test_n_and_b_turn_the_manual_pages_inside_the_help(shared: Shared) -> None:
    from tui import manual
    from tui.app.widgets.help import MarkdownText

    app, pilot = shared.app, shared.pilot
    await pilot.press("question_mark")
    await settle(pilot)
    page = app.screen.query_one("#help-metrics", MarkdownText)
    assert page.source.startswith("# What the numbers mean")
    following = next(p for p in manual.pages() if p.topic not in ("keys", "numbers"))
    await pilot.press("n")
    await settle(pilot)
    assert page.source == following.text
    await pilot.press("b")
    await settle(pilot)
    assert page.source.startswith("# What the numbers mean")
    await pilot.press("n", "d")
    await settle(pilot)
    assert page.source.startswith("# What the numbers mean")
    await pilot.press("escape")


KEY_SYMBOLS = {
    "plus": "+",
    "minus": "-",
    "equals_sign": "=",
    "right_square_bracket": "]",
    "left_square_bracket": "[",
    "question_mark": "?",
}
"""Textual's names for the keys the keys page writes as the character itself."""


def _bound_keys() -> dict[str, str]:
    """Every key any binding of the app uses (the app's, its screens' and its widgets'), with who binds it:
    found by walking `tui.app`, so a binding added anywhere there is checked without editing this test."""
    import importlib
    import inspect
    import pkgutil

    import tui.app

    bound: dict[str, str] = {}
    for info in pkgutil.walk_packages(tui.app.__path__, "tui.app."):
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__ or "BINDINGS" not in vars(cls):
                continue
            for binding in vars(cls)["BINDINGS"]:
                keys = binding.key if hasattr(binding, "key") else binding[0]
                for name in keys.split(","):
                    bound[KEY_SYMBOLS.get(name.strip(), name.strip())] = f"{module.__name__}.{cls.__name__}"
    return bound


@pytest.mark.filterwarnings("ignore:The test <Function test_every_bound_key:pytest.PytestWarning")
def test_every_bound_key_is_on_the_keys_page() -> None:
    from tui import manual

    page = manual.page("keys")
    assert page is not None
    bound = _bound_keys()
    assert {"+", "?", "q", "n", "enter"} <= set(bound)  # the walk found the app, the help and the lanes
    missing = {key: owner for key, owner in bound.items() if f"`{key}`" not in page.text}
    assert not missing, f"keys bound but not on tui/manual/keys.md: {missing}"
    table = "\n".join(line for line in page.text.splitlines() if line.startswith("|"))
    app_keys = {key for key, owner in bound.items() if owner == "tui.app.app.TokentopApp"}
    untabled = sorted(key for key in app_keys if f"`{key}`" not in table)
    assert not untabled, f"the live app's keys not in the keys page's table: {untabled}"


@pytest.mark.app_size(160, 48)
async def test_the_help_turns_through_every_page_of_the_manual(shared: Shared) -> None:
    """`?` shows the pages `tokentop help` lists: the keys page at its head, and every other page, each as
    the manual's own text, in the listing's order."""
    from tui import manual
    from tui.app.widgets.help import KEYS_MD, MarkdownText

    app, pilot = shared.app, shared.pilot
    await pilot.press("question_mark")
    await settle(pilot)
    assert KEYS_MD in app.screen.query_one("#help-keys", MarkdownText).source
    page = app.screen.query_one("#help-metrics", MarkdownText)
    others = [p for p in manual.pages() if p.topic != "keys"]
    shown = []
    for _ in others:
        shown.append(page.source)
        await pilot.press("n")
        await settle(pilot)
    assert page.source == shown[0]  # round the whole manual, back to the first page
    for p, source in zip(others, shown, strict=True):
        assert source == p.text, p.topic

    await pilot.press("escape")
