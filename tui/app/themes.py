"""Themes as TOML files mapped onto `textual.theme.Theme`.

The bundled themes live in `<repo>/themes` in a source checkout and in `tui/_themes` in a wheel (see
pyproject's force-include). A user adds one by dropping a file into that folder or into
`$XDG_CONFIG_HOME/tokentop/themes`, or by passing `--theme path/to/file.toml`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_THEME = "dark"

COLOUR_KEYS = (
    "primary", "secondary", "accent", "foreground", "background", "surface", "panel",
    "success", "warning", "error",
)  # fmt: skip
_KNOWN_KEYS = {"name", "dark", "variables", *COLOUR_KEYS}

APP_VARIABLE_DEFAULTS: dict[str, str] = {
    "plot-ttft": "#61afef",
    "plot-itl": "#c678dd",
    "plot-curve": "#98c379",
    "plot-curve-2": "#56b6c2",
    "plot-knee": "#e06c75",
    "plot-marker": "#e5c07b",
    "plot-axes": "#7f848e",
    "lane-text": "#d7dae0",
    "lane-meta": "#7f848e",
    "gauge-bar": "#98c379",
}
"""Variables the app's styles and plots use; a theme may override any of them."""


class ThemeError(Exception):
    """A theme file that cannot be used; the message is one line naming the file."""


def theme_dirs() -> list[Path]:
    """Folders searched for `*.toml` themes, later ones overriding earlier ones by name."""
    dirs: list[Path] = []
    checkout = Path(__file__).resolve().parents[2] / "themes"
    if checkout.is_dir():
        dirs.append(checkout)
    else:
        bundled = resources.files("tui") / "_themes"
        if bundled.is_dir():
            dirs.append(Path(str(bundled)))
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    user = Path(config_home) / "tokentop" / "themes"
    if user.is_dir():
        dirs.append(user)
    return dirs


def load_theme_file(path: Path) -> Theme:
    """Parse one theme file; raise `ThemeError` with a one-line reason if it is unusable."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ThemeError(f"theme file {path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ThemeError(f"theme file {path}: not valid TOML: {exc}") from None
    return theme_from_dict(data, source=str(path))


def theme_from_dict(data: dict[str, Any], *, source: str) -> Theme:
    """Validate a parsed theme table and build the Theme (colours checked here, not at first paint)."""

    def fail(reason: str) -> ThemeError:
        return ThemeError(f"theme file {source}: {reason}")

    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(_KNOWN_KEYS))})")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail("'name' must be a non-empty string")
    if "primary" not in data:
        raise fail("'primary' colour is required")
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise fail("'dark' must be true or false")
    colours: dict[str, str] = {}
    for key in COLOUR_KEYS:
        if key in data:
            colours[key] = _colour(data[key], key, fail)
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise fail("[variables] must be a table")
    clean_vars: dict[str, str] = {}
    for key, value in variables.items():
        if not isinstance(value, str):
            raise fail(f"variable {key!r} must be a string")
        # Our own variables feed plotext as RGB, so they must be plain colours.
        clean_vars[key] = _colour(value, key, fail) if key in APP_VARIABLE_DEFAULTS else value
    return Theme(
        name=name.strip(),
        dark=dark,
        variables=clean_vars,
        primary=colours["primary"],
        secondary=colours.get("secondary"),
        accent=colours.get("accent"),
        foreground=colours.get("foreground"),
        background=colours.get("background"),
        surface=colours.get("surface"),
        panel=colours.get("panel"),
        success=colours.get("success"),
        warning=colours.get("warning"),
        error=colours.get("error"),
    )


def _colour(value: object, key: str, fail: Any) -> str:
    if not isinstance(value, str):
        raise fail(f'{key!r} must be a colour string like "#1b1f27"')
    try:
        Color.parse(value)
    except ColorParseError:
        raise fail(f"{key!r} is not a colour: {value!r}") from None
    return value


def load_themes(dirs: Iterable[Path] | None = None) -> dict[str, Theme]:
    """All themes found in `dirs` (default `theme_dirs()`), by name, in file-name order."""
    themes: dict[str, Theme] = {}
    for folder in theme_dirs() if dirs is None else dirs:
        for path in sorted(folder.glob("*.toml")):
            theme = load_theme_file(path)
            themes[theme.name] = theme
    return themes


def resolve_theme(spec: str | None, themes: dict[str, Theme]) -> Theme:
    """`--theme` value: a known name, or a path to a theme file (added to `themes`)."""
    if spec is None:
        if DEFAULT_THEME in themes:
            return themes[DEFAULT_THEME]
        if themes:
            return next(iter(themes.values()))
        raise ThemeError("no themes found (the themes folder is missing from this install)")
    path = Path(spec).expanduser()
    if spec.endswith(".toml") or os.sep in spec or path.is_file():
        theme = load_theme_file(path)
        themes[theme.name] = theme
        return theme
    if spec in themes:
        return themes[spec]
    raise ThemeError(f"unknown theme {spec!r} (known: {', '.join(themes) or 'none'}; or give a file path)")


def theme_rgb(variables: dict[str, str], name: str) -> tuple[int, int, int]:
    """A theme variable as an RGB triple for plotext (falls back to the app default)."""
    value = variables.get(name) or APP_VARIABLE_DEFAULTS.get(name, "#808080")
    try:
        return Color.parse(value).rgb
    except ColorParseError:
        return Color.parse(APP_VARIABLE_DEFAULTS.get(name, "#808080")).rgb
