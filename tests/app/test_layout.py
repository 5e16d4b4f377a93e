"""Pilot tests: the layout follows the terminal's current size, and the footer fits what it can."""

from __future__ import annotations

import pytest
from textual.binding import Binding

from tests.app.conftest import MakeApp, screen_text, settle
from tests.app.test_server_pane import _view as server_view
from tests.support.fake_engine import FakeEngine
from tests.unit.test_cost_energy import LEVEL_POWER_W, energy_view
from tui import units
from tui.app.app import TokentopApp
from tui.app.widgets.footer import FooterEntry, KeyFooter, fit_entries
from tui.app.widgets.level_table import COLUMNS, level_cells


async def test_resizing_small_and_back_follows_the_current_size(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert not app.compact
        assert "v view" not in screen_text(app).splitlines()[-1]
        wide_lanes = app._lanes.region
        assert app._curve.region.x > wide_lanes.x  # side by side
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        assert app.compact
        assert app._lanes.region.height >= 5 and app._curve.region.height >= 10  # stacked, both visible
        assert app._lanes.region.width == 80 and app._curve.region.width == 80
        assert "token streams" in screen_text(app)
        await pilot.press("v")
        assert app.view == "latency"
        await pilot.resize_terminal(160, 48)
        await settle(pilot)
        assert not app.compact
        assert app._lanes.region == wide_lanes
        assert app._ttft.region.area and app._table.region.area  # every pane again
        await pilot.press("v")
        assert app.view == "latency"  # `v` does nothing while every pane is shown
        assert "v view" not in screen_text(app).splitlines()[-1]


async def test_level_names_stay_when_the_table_scrolls_sideways(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("v", "v")
        await settle(pilot)
        app.poll(force=True)
        await settle(pilot)
        header = next(line for line in screen_text(app).splitlines() if "level" in line and "tok/s" in line)
        # The load, its throughput and TTFT come first, in view at 80 columns.
        assert header.index("level") < header.index("tok/s") < header.index("TTFT p50/90/99")
        assert "176.0" in screen_text(app) and "118/177/260" in screen_text(app)
        table = app._table
        table.focus()
        for _ in range(40):  # far enough right that the first figures are out of view
            await pilot.press("right")
        await settle(pilot)
        assert table.scroll_x > 0
        text = screen_text(app)
        assert "E2E" in text and "TTFT p50/90/99" not in text  # scrolled past the first figures
        assert "▶ 8 users" in text and "4 users ◆" in text and "1 users" in text


def _footer(app: TokentopApp) -> str:
    return screen_text(app).splitlines()[-1]


async def test_the_footer_shows_every_key_that_fits(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        wide = _footer(app)
        for key in ("+/- load", "]/[ ×2 ÷2", "m mode", "space pause", "a ramp", "i ITL", "w window"):
            assert key in wide
        for key in ("p freeze", "s save", "t theme", "^p palette", "? help", "q quit"):
            assert key in wide  # hidden before, even at 160 columns
        assert "v view" not in wide  # every pane is shown: nothing to cycle
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        narrow = _footer(app)
        assert len(narrow.rstrip()) <= 80
        # The most useful keys stay; the small layout's `v` joins them; the rest is in `?` and ctrl+p.
        for key in ("+/- load", "]/[ ×2 ÷2", "space pause", "a ramp", "v view", "? help", "q quit"):
            assert key in narrow
        footer = app.query_one(KeyFooter)
        shown = [binding.action for binding, *_ in footer.shown()]
        left_out = [binding.action for binding, *_ in footer.entries() if binding.action not in shown]
        assert left_out and all(
            footer.rank.index(out) > footer.rank.index("quit") for out in left_out
        )  # only the less useful give way
        await pilot.resize_terminal(160, 48)
        await settle(pilot)
        assert _footer(app) == wide


def test_fit_entries_keeps_the_most_useful_and_their_order() -> None:
    def entry(action: str, description: str) -> FooterEntry:
        return (Binding(action[0], action, description), True, "", action[0])

    entries = [entry("alpha", "aaaa"), entry("beta", "bbbbbbbbbb"), entry("gamma", "g"), entry("delta", "dd")]
    rank = ("gamma", "beta", "alpha", "delta")
    assert [e[0].action for e in fit_entries(entries, rank, 200)] == ["alpha", "beta", "gamma", "delta"]
    # gamma (4 cells) and beta (13) take 17; alpha (7) does not fit 20, the shorter delta (5) still does.
    assert [e[0].action for e in fit_entries(entries, rank, 20)] == ["beta", "gamma"]
    assert [e[0].action for e in fit_entries(entries, rank, 21)] == ["beta", "gamma", "delta"]
    focused = [entry("open", "open request"), *entries]
    assert fit_entries(focused, rank, 16)[0][0].action == "open"  # a focused widget's own key first


SERVER_ROWS = 12
"""What a vLLM server fills the server pane with: six gauges, TTFT p50/p99 (a heading, server, client and
their difference) and the queue and ITL quantiles."""


@pytest.mark.parametrize("size", [(160, 48), (200, 60)], ids=["160x48", "200x60"])
async def test_the_level_table_shows_whole_values_and_the_server_pane_its_last_rows(
    engine: FakeEngine, make_app: MakeApp, size: tuple[int, int]
) -> None:
    engine.server = server_view()
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        app.poll(force=True)
        await settle(pilot)
        table = app._table
        shown = [key for key, _ in table.columns_shown]
        assert {"level", "tps", "ttft"} <= set(shown)  # the most useful first: they always fit
        # every column shown is whole: nothing runs past the pane, so nothing is cut at its edge
        assert table.virtual_size.width <= table.scrollable_content_region.width, (
            table.virtual_size,
            table.scrollable_content_region,
        )
        lines = screen_text(app).splitlines()
        for level in engine.snap.levels:
            cells = level_cells(level, engine.snap.level_id, engine.snap.knee, "chunk")
            row = next(line for line in lines if cells["level"].strip() in line)
            assert all(cells[key] in row for key in shown if key != "srv"), (shown, row)
        if len(shown) < len(COLUMNS):
            assert "not shown:" in str(table.border_subtitle)
        assert app._server.scrollable_content_region.height >= SERVER_ROWS


async def test_with_a_price_and_energy_the_level_table_shows_dollars_and_joules_per_token_beside_tok_s(
    engine: FakeEngine, make_app: MakeApp
) -> None:
    """$/Mtok with --cost-per-hour; J/tok beside it once the GPUs' energy counter covers a level (a fake
    DCGM exporter's readings over the first three levels: the fourth, still running, has none yet)."""
    app = make_app(cost_per_hour=3.5)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot)
        app.poll(force=True)
        await settle(pilot)
        shown = [key for key, _ in app._table.columns_shown]
        assert shown[shown.index("tps") + 1] == "cost" and "joule" not in shown  # no energy read yet
        text = screen_text(app)
        for level in engine.snap.levels:  # the price of each level's rate, as the results write it
            assert units.dollars(3.5 / 3600 / level.output_tps * 1e6) in text
        engine.server = energy_view()
        app.poll(force=True)
        await settle(pilot)
        shown = [key for key, _ in app._table.columns_shown]
        assert shown[shown.index("tps") + 1 :][:2] == ["cost", "joule"]
        lines = screen_text(app).splitlines()
    assert any("J/tok" in line for line in lines)
    for level in engine.snap.levels[:3]:
        price = units.dollars(3.5 / 3600 / level.output_tps * 1e6)
        row = next(line for line in lines if f"{level.value:g} users" in line and price in line)
        assert f"{LEVEL_POWER_W[level.level_id] / level.output_tps:.3g}" in row.split(), row
    assert level_cells(engine.snap.levels[0], 1, None, "chunk")["cost"] == "-"  # no price, no figure
