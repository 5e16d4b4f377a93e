"""Base for panes whose body is a plotext plot: data in cheaply, plot rebuilt only when asked."""

from __future__ import annotations

from collections.abc import Hashable

from rich.console import Group, RenderableType
from rich.text import Text
from textual.widget import Widget

from tui.app.plotting import Plot
from tui.app.themes import theme_rgb


class PlotPane(Widget):
    """Holds the latest data and the last built plot. The app's scheduler calls `redraw()` (at most one
    plot per tick, each at most ~2 Hz) when `stale` and visible; user actions redraw at once."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._plot = Plot()
        self._data_key: Hashable = None
        self._drawn_key: Hashable = ("never",)
        self._header: Text = Text()
        self._body: Text = Text()

    # --- for subclasses ---------------------------------------------------------------------------

    def header_lines(self) -> Text:
        """Lines above the plot (gauge, stats); one Text, newline-separated."""
        return Text()

    def build_plot(self, width: int, height: int) -> Text:
        raise NotImplementedError

    def colour(self, variable: str) -> tuple[int, int, int]:
        return theme_rgb(self.app.theme_variables, variable)

    # --- scheduling -------------------------------------------------------------------------------

    def set_data_key(self, key: Hashable) -> None:
        self._data_key = key

    def _key(self) -> Hashable:
        return (self._data_key, self.content_size, self.app.theme)

    @property
    def stale(self) -> bool:
        return self._key() != self._drawn_key

    @property
    def resized(self) -> bool:
        drawn = self._drawn_key
        return isinstance(drawn, tuple) and len(drawn) == 3 and drawn[1] != self.content_size

    @property
    def showing(self) -> bool:
        """On the active screen and given some room (compact layouts hide whole panes)."""
        return self.display and self.screen.is_active and self.region.area > 0

    def refresh_header(self) -> None:
        """Cheap, every tick: gauges and stats lines move at the counter rate, the plot at ~2 Hz."""
        header = self.header_lines()
        if header != self._header:
            self._header = header
            self.refresh()

    def redraw(self) -> None:
        self._header = self.header_lines()
        size = self.content_size
        header_rows = len(self._header.plain.split("\n")) if self._header.plain else 0
        self._body = self.build_plot(size.width, max(0, size.height - header_rows))
        self._drawn_key = self._key()
        self.refresh()

    def render(self) -> RenderableType:
        if not self._header.plain:
            return self._body
        return Group(self._header, self._body)
