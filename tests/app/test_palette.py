"""Pilot tests: the command palette (ctrl+p) finds every key's action by the words its key shows."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual.binding import Binding
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot

from tests.app.conftest import MakeApp, settle
from tui.app import keys
from tui.app.playback import REPLAY_BINDINGS, REPLAY_COMMANDS
from tui.app.widgets.detail import RequestDetailScreen


def _actions(bindings: list[Any]) -> set[str]:
    return {b.action for b in bindings if isinstance(b, Binding) and b.action != "command_palette"}


def test_every_key_of_the_live_app_and_the_replay_has_a_palette_entry() -> None:
    live = {action for _, _, action in keys.COMMANDS}
    assert _actions(keys.BINDINGS) <= live, _actions(keys.BINDINGS) - live
    replay = live | {action for _, _, action in REPLAY_COMMANDS}
    assert _actions(REPLAY_BINDINGS) <= replay, _actions(REPLAY_BINDINGS) - replay


async def _until(pilot: Pilot[Any], ok: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.02)


async def _search(pilot: Pilot[Any], query: str) -> list[str]:
    """The palette's hits for ``query``, typed into a freshly opened palette."""
    await pilot.press("ctrl+p")
    await _until(pilot, lambda: isinstance(pilot.app.screen, CommandPalette), "the palette")
    await pilot.press(*query)
    hits = pilot.app.screen.query_one(CommandList)
    await _until(pilot, lambda: hits.option_count > 0 and not hits.has_class("--populating"), "hits")
    return [str(hits.get_option_at_index(i).prompt) for i in range(hits.option_count)]


async def test_searching_view_and_request_finds_the_keys_actions(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.poll(force=True)
        assert any("Next view" in hit for hit in await _search(pilot, "view"))
        await pilot.press("escape")
        await _until(pilot, lambda: not isinstance(app.screen, CommandPalette), "the palette to close")
        hits = await _search(pilot, "request")
        assert "Inspect a request" in hits[0], hits
        await pilot.press("enter")  # the palette's pick opens a lane's request, as tab then enter do
        await _until(pilot, lambda: isinstance(app.screen, RequestDetailScreen), "the request's detail")
        await pilot.press("escape")
        await _until(pilot, lambda: not isinstance(app.screen, RequestDetailScreen), "the detail to close")
        # `v` while every pane is on screen, picked from the palette: it says why nothing changed
        await pilot.press("v")
        assert app.view == "live"
        assert any("every pane is on screen" in n.message for n in app._notifications)


async def test_watch_offers_no_load_action_in_the_palette(make_app: MakeApp) -> None:
    app = make_app(watch_only=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert "Help" in titles and "More load" not in titles and "Inspect a request" not in titles
