"""What the panes show for the frozen snapshot, and when plots are rebuilt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from rich.style import Style

from tests.app.conftest import MakeApp, screen_text, settle
from tests.support import frozen
from tests.support.fake_engine import FakeEngine
from tui.app.plotting import PlotLines
from tui.app.widgets.curve import ThroughputCurve
from tui.app.widgets.help import HelpScreen, MarkdownText
from tui.app.widgets.level_table import LevelTable
from tui.app.widgets.plot_pane import PlotPane
from tui.app.widgets.status import SATURATED_BADGE, FatalBanner
from tui.app.widgets.streams import StreamLanes
from tui.engine.snapshot import ClientHealth


async def test_wide_screen_shows_every_pane(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        text = screen_text(app)
    for part in (
        "http://127.0.0.1:8000/v1",
        "concurrency 8",
        "demo: built-in simulator",
        "#301",  # a lane
        "waiting for first token",
        "✗ HTTP 500: simulated internal error",
        "+4 more in flight",  # in flight 8 = 4 lanes in flight + 4
        "knee 4 users",  # the curve's legend
        "TTFT · last 10 s",
        "p99 880ms",
        "ITL per chunk gap",
        "▶ 8 users",
        "4 users ◆",
        "http_500",
    ):
        assert part in text, part


async def test_table_rows_are_keyed_by_level_and_updated_in_place(
    make_app: MakeApp, engine: FakeEngine
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        table = app.query_one(LevelTable)
        assert [key.value for key in table.rows] == ["1", "2", "3", "4"]
        assert table.cursor_row == 3  # the cursor follows the current level
        last = replace(engine.snap.levels[3], output_tps=222.5)
        engine.snap = replace(engine.snap, seq=43, levels=(*engine.snap.levels[:3], last))
        app.poll(force=True)
        assert table.row_count == 4
        assert table.get_cell("4", "tps").plain == "222.5"


async def test_fatal_reason_is_shown_across_the_top(make_app: MakeApp, engine: FakeEngine) -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        engine.snap = replace(engine.snap, seq=43, fatal="cannot connect to http://127.0.0.1:9/v1")
        app.poll()
        await settle(pilot)
        banner = app.query_one(FatalBanner)
        assert banner.display
        assert "engine stopped: cannot connect" in screen_text(app).splitlines()[0]


async def test_plots_redraw_at_most_one_per_tick_and_only_when_visible(
    make_app: MakeApp, engine: FakeEngine
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        draws: list[str] = []
        for pane in app.query(PlotPane):
            original = pane.redraw

            def counted(pane: PlotPane = pane, original: Callable[[], None] = original) -> None:
                draws.append(str(pane.id))
                original()

            pane.redraw = counted  # type: ignore[method-assign]
        app.poll()
        assert draws == []  # same seq, nothing changed
        # New data for every plot: they are redrawn one per tick, not all in one frame.
        for seq in range(43, 43 + 12):
            hist = {w: replace(h, counts=(seq, *h.counts[1:])) for w, h in engine.snap.ttft_hist.items()}
            itl = {k: replace(h, counts=(seq, *h.counts[1:])) for k, h in engine.snap.itl_hist.items()}
            levels = (*engine.snap.levels[:3], replace(engine.snap.levels[3], output_tps=float(seq)))
            engine.snap = replace(engine.snap, seq=seq, ttft_hist=hist, itl_hist=itl, levels=levels)
            before = len(draws)
            app.poll()
            assert len(draws) - before <= 1
        # Each of the three plots was redrawn: the curve at most every 5th tick, histograms every 10th.
        assert sorted(set(draws)) == ["curve", "itl", "ttft"]
        assert draws.count("curve") <= 3 and draws.count("ttft") <= 2 and draws.count("itl") <= 2


async def test_hidden_panes_are_not_drawn(make_app: MakeApp, engine: FakeEngine) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:  # compact: the histograms are in another view
        await settle(pilot)
        ttft = app.query_one("#ttft", PlotPane)
        assert not ttft.showing
        assert ttft._body.plain == ""
        for seq in range(43, 55):
            hist = {w: replace(h, counts=(seq, *h.counts[1:])) for w, h in engine.snap.ttft_hist.items()}
            engine.snap = replace(engine.snap, seq=seq, ttft_hist=hist)
            app.poll()
        assert ttft._body.plain == ""
        await pilot.press("v")
        await settle(pilot)
        assert ttft.showing and "100ms" in ttft._body.plain


async def test_the_curve_follows_the_mode(make_app: MakeApp, engine: FakeEngine) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        curve = app.query_one(ThroughputCurve)
        assert "users" in str(curve.border_title)
        await pilot.press("m")
        app.poll(force=True)
        assert "req/s" in str(curve.border_title)
        assert "no load level measured yet" in curve._body.plain  # the frozen levels are all closed-loop


async def test_compact_view_key_moves_between_pane_groups(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "token streams" in screen_text(app)
        await pilot.press("v")
        await settle(pilot)
        assert "TTFT · last 10 s" in screen_text(app)
        await pilot.press("v")
        await settle(pilot)
        text = screen_text(app)
        assert "load levels" in text and "▶ 8 users" in text


async def test_lanes_put_in_flight_requests_first(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        order = [lane.request_id for lane in app._lanes._lanes]
    assert order == [301, 302, 304, 303, 298, 299]  # streaming, waiting, error, done


async def test_four_in_flight_never_read_as_more_in_flight(make_app: MakeApp, engine: FakeEngine) -> None:
    streaming = [replace(frozen.LANES[0], request_id=400 + i) for i in range(4)]
    finished = [replace(frozen.LANES[3], request_id=300 + i) for i in range(7)]
    engine.snap = replace(engine.snap, in_flight=4, lanes=(*streaming, *finished), lanes_hidden=0)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "more in flight" not in text  # 4 in flight, all 4 shown; finished lanes just run out
        assert all(f"#{400 + i}" in text for i in range(4))
        engine.snap = replace(engine.snap, seq=43, in_flight=9)
        app.poll()
        await settle(pilot)
        text = screen_text(app)
        assert "+5 more in flight" in text


async def test_background_builds_never_queue_up_the_latest_wins(
    make_app: MakeApp, engine: FakeEngine
) -> None:
    app = make_app(plot_thread=True)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await app.workers.wait_for_complete()
        ttft = app.query_one("#ttft", PlotPane)
        built: list[int] = []
        original = ttft.plot_job

        def counted(width: int, height: int) -> Callable[[], PlotLines]:
            job = original(width, height)
            seq = engine.snap.seq

            def run() -> PlotLines:
                built.append(seq)
                return job()

            return run

        ttft.plot_job = counted  # type: ignore[method-assign]
        # Five requests before the loop runs the build: only the last one is built, and shown.
        for seq in range(43, 48):
            hist = {
                w: replace(h, counts=(seq * 1000, *h.counts[1:])) for w, h in engine.snap.ttft_hist.items()
            }
            engine.snap = replace(engine.snap, seq=seq, ttft_hist=hist)
            app.poll()
            ttft.redraw()
        assert built == []  # nothing built on the UI thread
        await app.workers.wait_for_complete()
        await settle(pilot)
        assert built == [47]
        assert not ttft.stale and ttft._drawn_key == ttft._key()  # what is shown is the latest data


async def test_saturation_is_a_one_row_badge_and_a_long_line_still_wraps(
    make_app: MakeApp, engine: FakeEngine
) -> None:
    """A long saturation reason used to wrap the status bar over 2-4 rows: now a badge keeps the bar's
    height, and the reason is in the help. A first line too long for the width (a long URL) still takes
    the wrapping path, and the bar grows by the lines it needs."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        status = app._status
        rows = status.size.height
        reason = (
            "load generator delayed (event-loop lag p99 4.2 ms at 35% of a core): token timings may be late"
        )
        engine.snap = replace(engine.snap, seq=43, health=ClientHealth(saturated=True, reason=reason))
        app.poll(force=True)
        await settle(pilot)
        assert status.size.height == rows
        top = screen_text(app).splitlines()[:rows]
        assert SATURATED_BADGE in top[2] and "token timings" not in " ".join(top)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert reason in str(app.screen.query_one("#help-health", MarkdownText).source)
        await pilot.press("escape")
        await settle(pilot)
        long_url = "http://inference.example.internal:8000/some/very/long/prefix/v1"
        engine.snap = replace(engine.snap, seq=44, health=ClientHealth(), base_url=long_url)
        app.poll(force=True)
        await settle(pilot)
        assert status.size.height > rows
        assert long_url in " ".join(screen_text(app).splitlines()[: status.size.height]).replace(" ", "")


async def test_status_says_probing_until_the_engine_started(make_app: MakeApp, engine: FakeEngine) -> None:
    """A slow /v1/models used to show "▶ running" with no word of the probe."""
    engine.ready = False
    engine.snap = replace(engine.snap, model="", in_flight=0, completed=0, failed=0, lanes=(), levels=())
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.poll(force=True)
        assert "probing http://127.0.0.1:8000/v1/models…" in app._status.plain
        assert "running" not in app._status.plain
        engine.ready = True
        engine.snap = replace(engine.snap, seq=43, model="sim-llama-8b")
        app.poll()
        assert "▶ running" in app._status.plain and "probing" not in app._status.plain
        engine.ready = False  # once started, the app does not ask again
        engine.snap = replace(engine.snap, seq=44)
        app.poll()
        assert "▶ running" in app._status.plain


async def test_the_prefix_cache_column_appears_once_a_level_has_a_hit_rate(
    make_app: MakeApp, engine: FakeEngine
) -> None:
    app = make_app()
    async with app.run_test(size=(260, 50)) as pilot:  # wide enough for every column, whole
        await settle(pilot)
        table = app.query_one(LevelTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert "prefix cache" not in labels  # no server reported cached tokens: no column
        levels = engine.snap.levels
        cached = replace(levels[3], cached_tokens=420, cache_hit_rate=0.42)
        engine.snap = replace(engine.snap, seq=43, levels=(*levels[:3], cached))
        app.poll(force=True)
        await settle(pilot)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels.index("prefix cache") == labels.index("ISL/OSL") + 1 and table.row_count == 4
        assert table.get_cell("4", "cache").plain == "42%" and table.get_cell("1", "cache").plain == "-"


async def test_a_lanes_reasoning_is_drawn_apart_from_its_answer(
    make_app: MakeApp, engine: FakeEngine
) -> None:
    thinking = replace(
        frozen.LANES[0], reasoning_tail="weighing both options", text_tail="Take the first one"
    )
    only_thinking = replace(frozen.LANES[1], reasoning_tail="still thinking it over", text_tail="")
    engine.snap = replace(engine.snap, seq=43, lanes=(thinking, only_thinking, *frozen.LANES[2:]))
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        lanes = app.query_one(StreamLanes)
        segments = [seg for y in range(3) for seg in lanes.render_line(y)]
    assert "weighing both options▸ Take the first one" in text
    assert "still thinking it over" in text and "still thinking it over▸" not in text
    style = {seg.text: seg.style for seg in segments if seg.text.strip()}
    reasoning, answer = style["weighing both options"], style["Take the first one"]
    assert reasoning is not None and reasoning.italic and answer is not None and not answer.italic
    assert reasoning.color != answer.color  # dim: the lanes' meta colour, not the text's


async def test_a_paused_load_marks_no_level_as_running(make_app: MakeApp) -> None:
    """Paused (space, or where the auto ramp leaves the load), no level runs: the table's ▶ goes with it."""
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert "▶ 8 users" in screen_text(app)
        await pilot.press("space")
        app.poll(force=True)
        await settle(pilot)
        text = screen_text(app)
        assert "8 users" in text and "▶ 8 users" not in text
        await pilot.press("space")
        app.poll(force=True)
        await settle(pilot)
        assert "▶ 8 users" in screen_text(app)


async def test_a_pane_drawn_after_its_removal_draws_plain_rather_than_failing(make_app: MakeApp) -> None:
    """A tick can reach the status bar while the app tears it down; Textual has cleared its component
    styles by then, and the lookup raised KeyError ("No 'status--warning' key in COMPONENT_CLASSES")."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        bar = app._status
        assert bar.component_style("status--warning") != Style()  # styled while mounted
        shown = bar._shown
        assert shown is not None
        await bar.remove()
        bar.component_style._cache.clear()  # as a theme change would: looked up again
        bar.show(*shown)
        assert bar.component_style("status--warning") == Style()
