"""Themes: the bundled folder, a user's file by path, and bad files failing in one line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests.app.conftest import MakeApp, settle
from tui.app.themes import (
    APP_VARIABLE_DEFAULTS,
    ThemeError,
    load_theme_file,
    load_themes,
    resolve_theme,
    theme_dirs,
    theme_rgb,
)

GOOD = """\
name = "mine"
dark = false
primary = "#112233"
background = "#fefefe"
[variables]
plot-ttft = "#ff0000"
"""


def test_bundled_themes_load_from_the_folder() -> None:
    themes = load_themes()
    assert {"dark", "light", "high-contrast"} <= set(themes)
    assert themes["light"].dark is False
    for theme in themes.values():
        # Every bundled theme sets every app variable, so no plot falls back to the defaults.
        assert set(APP_VARIABLE_DEFAULTS) <= set(theme.variables), theme.name
    assert any(folder.name in ("themes", "_themes") for folder in theme_dirs())


def test_dropping_a_file_in_a_folder_adds_a_theme(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(GOOD)
    themes = load_themes([*theme_dirs(), tmp_path])
    assert themes["mine"].primary == "#112233"
    assert theme_rgb(themes["mine"].variables, "plot-ttft") == (255, 0, 0)
    assert theme_rgb(themes["mine"].variables, "plot-itl") == theme_rgb({}, "plot-itl")


def test_a_theme_file_by_path(tmp_path: Path) -> None:
    path = tmp_path / "custom.toml"
    path.write_text(GOOD)
    themes = load_themes()
    theme = resolve_theme(str(path), themes)
    assert theme.name == "mine" and "mine" in themes
    assert resolve_theme(None, themes).name == "dark"
    assert resolve_theme("light", themes).name == "light"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("name = 'x'\nprimary = \n", "not valid TOML"),
        ("primary = '#000000'\n", "'name'"),
        ("name = 'x'\n", "'primary'"),
        ("name = 'x'\nprimary = 'blurple'\n", "'primary' is not a colour"),
        ("name = 'x'\nprimary = '#000000'\nprimry = '#000000'\n", "unknown key 'primry'"),
        ("name = 'x'\nprimary = '#000000'\n[variables]\nplot-knee = 'nope'\n", "'plot-knee' is not a colour"),
        ("name = 'x'\nprimary = '#000000'\ndark = 'yes'\n", "'dark'"),
    ],
)
def test_a_bad_theme_file_fails_in_one_line(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ThemeError) as info:
        load_theme_file(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message and reason in message


def test_unknown_theme_name_lists_the_known_ones() -> None:
    with pytest.raises(ThemeError, match="known: dark"):
        resolve_theme("nosuch", load_themes())


def test_cli_reports_a_bad_theme_file_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import main

    path = tmp_path / "bad.toml"
    path.write_text("name = 'x'\nprimary = 'blurple'\n")
    assert main(["--theme", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a colour" in err and "Traceback" not in err


def test_run_refuses_without_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from tui.app.run import run
    from tui.cli import build_parser
    from tui.cli.live import live_config
    from tui.configs import UsageError

    monkeypatch.setattr("sys.stdin", io.StringIO())

    ns: argparse.Namespace = build_parser().parse_args([])
    with pytest.raises(UsageError, match="needs a terminal"):
        run(live_config(ns))


async def test_a_user_theme_applies_its_variables_to_plots(make_app: MakeApp, tmp_path: Path) -> None:
    from tui.app.app import TokentopApp
    from tui.app.widgets.latency import LatencyHistogram

    themes = load_themes()
    path = tmp_path / "mine.toml"
    path.write_text(GOOD)
    theme = resolve_theme(str(path), themes)
    app: TokentopApp = make_app(theme=theme.name)
    app.register_theme(theme)
    app._theme_names.append(theme.name)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        app.poll(force=True)
        await settle(pilot)
        assert app.theme == "mine"
        assert app.theme_variables["plot-ttft"] == "#ff0000"
        ttft = app.query_one("#ttft", LatencyHistogram)
        colours = {
            seg.style.color.get_truecolor().hex
            for line in ttft._body.lines
            for seg in line
            if seg.style and seg.style.color
        }
        assert "#ff0000" in colours
