"""Fixtures for the app tests: a fake engine, the bundled themes, and an app wired to both."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.css.model import RuleSet
from textual.css.stylesheet import Stylesheet
from textual.css.types import CSSLocation
from textual.pilot import Pilot

from tests.support.fake_engine import FakeEngine
from tui.app.app import TokentopApp
from tui.app.settings import AppSettings
from tui.app.themes import load_themes

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
