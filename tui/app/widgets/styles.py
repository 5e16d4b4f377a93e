"""Component styles looked up once per theme instead of on every render."""

from __future__ import annotations

from collections.abc import Callable

from rich.style import Style
from textual.theme import Theme
from textual.widget import Widget


class ComponentStyles:
    """`styles("lanes--error")` is `widget.get_component_rich_style(...)`, cached until the theme changes.
    Resolving a component style walks the CSS (~0.1 ms); the lanes and the gauge need several per tick.
    The cache is cleared by the app's theme signal, which fires after the new theme's CSS is applied."""

    def __init__(self, widget: Widget, on_change: Callable[[], object] | None = None) -> None:
        self._widget = widget
        self._on_change = on_change or widget.refresh
        self._cache: dict[str, Style] = {}
        self._subscribed = False

    def __call__(self, name: str) -> Style:
        if not self._subscribed:
            self._widget.app.theme_changed_signal.subscribe(self._widget, self._clear)
            self._subscribed = True
        style = self._cache.get(name)
        if style is None:
            try:
                style = self._cache[name] = self._widget.get_component_rich_style(name)
            except KeyError:  # removed (Textual clears its component styles), e.g. a tick as the app exits
                return Style()
        return style

    def _clear(self, _theme: Theme) -> None:
        self._cache.clear()
        self._on_change()
