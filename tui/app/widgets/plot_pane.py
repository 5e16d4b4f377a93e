"""Base for panes whose body is a plotext plot: data in cheaply, plot rebuilt only when asked."""

from __future__ import annotations

from collections.abc import Hashable

from rich.segment import Segment
from rich.text import Text
from textual.app import ComposeResult
from textual.strip import Strip
from textual.widget import Widget

from tui.app.plotting import Plot, PlotLines
from tui.app.themes import theme_rgb
from tui.app.widgets.text_lines import TextLines


class _PlotBody(Widget):
    """The plot itself, drawn with the line API from pre-built segments: no Text to convert and wrap."""

    def __init__(self) -> None:
        super().__init__(classes="plot--body")
        self.plot = PlotLines([])
        self._strips: list[Strip] | None = None
        self._strips_key: object = None

    def show(self, plot: PlotLines) -> None:
        self.plot = plot
        self._strips = None
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        base = self.rich_style
        key = (width, base)
        if self._strips is None or key != self._strips_key:
            self._strips = [
                Strip(
                    [Segment(seg.text, base + seg.style if seg.style else base) for seg in line]
                ).adjust_cell_length(width, base)
                for line in self.plot.lines
            ]
            self._strips_key = key
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, base)


class PlotPane(Widget):
    """Holds the latest data and the last built plot. The app's scheduler calls `redraw()` (at most one
    plot per tick, each at most ~2 Hz) when `stale` and visible; user actions redraw at once."""

    DEFAULT_CSS = """
    PlotPane { layout: vertical; }
    PlotPane > .plot--header { height: auto; }
    PlotPane > .plot--body { height: 1fr; }
    """

    every_ticks = 5
    """Rebuild from new data at most every this many app ticks (5 = 2 Hz at the 10 Hz tick)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.drawn_tick = -(10**9)
        """The app tick of the last build (kept by the app's scheduler)."""
        self._plot = Plot()
        self._data_key: Hashable = None
        self._drawn_key: Hashable = ("never",)
        self._header_view = TextLines(classes="plot--header")
        self._body_view = _PlotBody()

    def compose(self) -> ComposeResult:
        yield self._header_view
        yield self._body_view

    @property
    def _body(self) -> PlotLines:
        return self._body_view.plot

    # --- for subclasses ---------------------------------------------------------------------------

    def header_lines(self) -> Text:
        """Lines above the plot (gauge, stats); one Text, newline-separated."""
        return Text()

    def build_plot(self, width: int, height: int) -> PlotLines:
        raise NotImplementedError

    def colour(self, variable: str) -> tuple[int, int, int]:
        return theme_rgb(self.app.theme_variables, variable)

    # --- scheduling -------------------------------------------------------------------------------

    def set_data_key(self, key: Hashable) -> None:
        self._data_key = key

    def _key(self) -> Hashable:
        return (self._data_key, self._body_view.content_size, self.app.theme)

    @property
    def stale(self) -> bool:
        return self._key() != self._drawn_key

    @property
    def resized(self) -> bool:
        drawn = self._drawn_key
        return isinstance(drawn, tuple) and len(drawn) == 3 and drawn[1] != self._body_view.content_size

    @property
    def showing(self) -> bool:
        """On the active screen and given some room (compact layouts hide whole panes)."""
        return self.display and self.screen.is_active and self._body_view.region.area > 0

    def refresh_header(self) -> None:
        """Cheap, every tick: gauges and stats lines move at the counter rate, the plot at ~2 Hz."""
        self._header_view.set_text(self.header_lines())

    def redraw(self) -> None:
        size = self._body_view.content_size
        self._body_view.show(self.build_plot(size.width, size.height))
        self._drawn_key = self._key()
