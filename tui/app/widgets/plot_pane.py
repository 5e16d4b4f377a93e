"""Base for panes whose body is a plotext plot: data in cheaply, plot rebuilt only when asked.

A build (plotext, ~5 ms) runs on a background executor when the app gives one: the UI thread only reads
the theme and the data into a job, then later shows the finished `PlotLines`. Builds of one pane never
overlap or queue up: while one runs, newer requests replace each other and only the latest runs next.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from concurrent.futures import Executor

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
        self.executor: Executor | None = None
        """Where plots are built; None builds inline on the UI thread (deterministic, for tests)."""
        self._data_key: Hashable = None
        self._requested_key: Hashable = ("never",)
        self._drawn_key: Hashable = ("never",)
        self._pending: tuple[PlotJob, Hashable] | None = None
        self._building = False
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

    def plot_job(self, width: int, height: int) -> PlotJob:
        """Read everything the build needs here, on the UI thread (theme colours as RGB, immutable
        snapshot data), and return a call that only touches those values and this pane's own figure."""
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
        """The data, size or theme differ from the last build asked for (in flight or shown)."""
        return self._key() != self._requested_key

    @property
    def resized(self) -> bool:
        asked = self._requested_key
        return isinstance(asked, tuple) and len(asked) == 3 and asked[1] != self._body_view.content_size

    @property
    def showing(self) -> bool:
        """On the active screen and given some room (compact layouts hide whole panes)."""
        return self.display and self.screen.is_active and self._body_view.region.area > 0

    def refresh_header(self) -> None:
        """Cheap, every tick: gauges and stats lines move at the counter rate, the plot at ~2 Hz."""
        self._header_view.set_text(self.header_lines())

    def redraw(self) -> None:
        """Ask for a build from the current data; shown at once without an executor, else when done."""
        size = self._body_view.content_size
        key = self._key()
        job = self.plot_job(size.width, size.height)
        self._requested_key = key
        if self.executor is None:
            self._show_built(job(), key)
            return
        self._pending = (job, key)  # latest wins: replaces a request not yet started
        if not self._building:
            self._building = True
            self.run_worker(self._build_pending(self.executor), group=f"plot-{self.id}")

    async def _build_pending(self, executor: Executor) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending is not None:
                job, key = self._pending
                self._pending = None
                built = await loop.run_in_executor(executor, job)
                self._show_built(built, key)
        finally:
            self._building = False

    def _show_built(self, built: PlotLines, key: Hashable) -> None:
        self._body_view.show(built)
        self._drawn_key = key


PlotJob = Callable[[], PlotLines]
"""A plot build with its inputs bound: safe to run off the UI thread."""
