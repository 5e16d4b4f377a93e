"""Pilot tests: the layout follows the terminal's current size, and the footer fits what it can."""

from __future__ import annotations

from tests.app.conftest import MakeApp, screen_text, settle


async def test_resizing_small_and_back_follows_the_current_size(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert not app.compact
        assert app.check_action("next_view", ()) is False
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
        for _ in range(20):
            await pilot.press("right")
        await settle(pilot)
        assert table.scroll_x > 0
        text = screen_text(app)
        assert "E2E" in text and "TTFT p50/90/99" not in text  # scrolled past the first figures
        assert "▶ 8 users" in text and "4 users ◆" in text and "1 users" in text
