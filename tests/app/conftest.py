"""Fixtures for the app tests: a fake engine, the bundled themes, and an app wired to both."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from rich.console import Console
from textual.css.model import RuleSet
from textual.css.stylesheet import Stylesheet
from textual.css.types import CSSLocation
from textual.pilot import Pilot

from tests.support import frozen
from tests.support.fake_engine import FakeEngine
from tui.app.app import TokentopApp
from tui.app.settings import AppSettings
from tui.app.themes import load_themes
from tui.app.widgets.footer import KeyFooter

_PARSED: dict[tuple[object, ...], list[RuleSet]] = {}
_parse_rules = Stylesheet._parse_rules


def _parse_rules_once(
    self: Stylesheet, css: str, read_from: CSSLocation, *args: Any, **kwargs: Any
) -> list[RuleSet]:
    """Textual's CSS parse, shared by every app these tests start in a process: each app parses its
    stylesheet and every widget's default CSS again (~0.05 s of a ~0.3 s start-up), though the text and the
    theme's variables are the same. Keyed by both, so a theme or a CSS change still parses anew."""
    key = (css, read_from, args, tuple(sorted(kwargs.items())), tuple(sorted(self._variables.items())))
    if key not in _PARSED:
        _PARSED[key] = _parse_rules(self, css, read_from, *args, **kwargs)
    return _PARSED[key]


Stylesheet._parse_rules = _parse_rules_once  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "app_size(width, height): the terminal size `shared` gives a test")


MakeApp = Callable[..., TokentopApp]
"""The `make_app` fixture's type: make_app(theme="dark", **TokentopApp options)."""


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def make_app(engine: FakeEngine, tmp_path: Path) -> MakeApp:
    """An app whose timer never fires during a test (tests call `poll()`), with a frozen clock and plots
    built inline (`plot_thread=True` to test the background build)."""

    def make(theme: str = "dark", **kwargs: object) -> TokentopApp:
        options: dict[str, object] = {
            "save_dir": tmp_path,
            "tick_s": 3600.0,
            "clock_ns": lambda: 0,
            "cpu_clock_ns": lambda: 0,
            "plot_thread": False,  # plots built inline: the screen is complete when poll() returns
        }
        options.update(kwargs)
        return TokentopApp(engine, AppSettings(themes=load_themes(), theme=theme, **options))  # type: ignore[arg-type]

    return make


@dataclass
class Shared:
    """One app under Pilot that a module's tests share (`shared_app`), with its fake engine: each test
    acts on it and leaves it as it found it (`shared` checks that), so a module pays one start-up (~0.3 s
    of CPU each, the most of what a short key test costs) rather than one per test."""

    app: TokentopApp
    pilot: Pilot[Any]
    engine: FakeEngine

    async def size(self, width: int, height: int) -> None:
        """The terminal at ``width`` x ``height`` (as a test's own `run_test(size=...)` would have it)."""
        if tuple(self.app.size) != (width, height):
            await self.pilot.resize_terminal(width, height)
            await settle(self.pilot)

    def state(self) -> tuple[object, ...]:
        """What a test may change and must put back (the load target `shared` sets itself): the screens
        on top, the theme, the focus, the named window, convention and view, the ramp and frozen lanes."""
        app = self.app
        return (
            len(app.screen_stack),
            app.theme,
            app.focused,
            app.window_s,
            app.convention,
            app.view,
            app.auto_load.ramp,
            app._lanes.frozen,
        )


ON_SHARED_APP = pytest.mark.asyncio(loop_scope="module")
"""The mark of a module whose tests take `shared` (``pytestmark = ON_SHARED_APP``): all its tests run on the
module's one event loop, where the shared app runs (an app of another loop started between them leaves
Textual's state bound to that loop, and the shared app fails)."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shared]:
    """The module's one app (as `make_app()` makes it), started once; the tests of a module marked
    `ON_SHARED_APP` take it through `shared`."""
    engine = FakeEngine()
    settings = AppSettings(
        themes=load_themes(),
        theme="dark",
        save_dir=tmp_path_factory.mktemp("shared-app"),
        tick_s=3600.0,
        clock_ns=lambda: 0,
        cpu_clock_ns=lambda: 0,
        plot_thread=False,
    )
    app = TokentopApp(engine, settings)  # type: ignore[arg-type]
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        yield Shared(app, pilot, engine)


@pytest_asyncio.fixture(loop_scope="module")
async def shared(shared_app: Shared, request: pytest.FixtureRequest) -> AsyncIterator[Shared]:
    """The shared app at the test's size (``@pytest.mark.app_size(w, h)``, else 80 x 24) with a fresh fake
    engine's state (the frozen snapshot, no loads asked yet) shown and its load target; after the test, the
    rest must be back as it was (`Shared.state`): a test that leaves it changed fails here."""
    engine, app = shared_app.engine, shared_app.app
    app.poll(force=True)  # a tick on what the last test left, as the app's timer would have made one
    app.set_target(frozen.snapshot().load)  # as a key would set it (an `m` leaves its rate remembered)
    engine.__init__()  # type: ignore[misc]  # the frozen snapshot again, and nothing recorded
    marker = request.node.get_closest_marker("app_size")
    await shared_app.size(*(marker.args if marker else (80, 24)))
    app.poll(force=True)
    await settle(shared_app.pilot)
    footer = app.query_one(KeyFooter)
    for _ in range(50):  # the footer redraws a refresh or more later (`k` joins it once a knee is back)
        if footer._drawn == footer.shown():
            break
        await shared_app.pilot.pause()
    before = shared_app.state()
    yield shared_app
    after = shared_app.state()
    if after != before:  # put back what is easily put back, so the next tests do not fail of it too
        while len(app.screen_stack) > 1:
            app.pop_screen()
        app.set_focus(None)
        app.theme = "dark"
        await settle(shared_app.pilot)
    assert after == before, "the test left the shared app changed (restore what it changes)"


async def settle(pilot: Pilot[Any]) -> None:
    """Let posted messages and after-refresh callbacks run (no sleeping)."""
    for _ in range(3):
        await pilot.pause()


def screen_text(app: TokentopApp, *, styles: bool = False) -> str:
    """The screen as plain text (or ANSI with `styles`), rendered like `export_screenshot` does."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens, simplify=True)
    )
    return console.export_text(styles=styles)
