"""When and where the app's plots are built: at most one per tick, in turn, each only while on screen and
changed, on one background thread. A plot build (plotext, ~5 ms) on the UI thread made the UI's p99 tick."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from tui.app.widgets.plot_pane import PlotPane


class PlotCadence:
    """The plots' turns. With ``threaded`` one thread builds them and the UI thread only reads the theme and
    data in and shows the result; without it (tests) they are built inline, so a screen is complete as soon
    as the app's `poll()` returns."""

    def __init__(self, panes: Sequence[PlotPane], *, threaded: bool) -> None:
        self._panes = list(panes)
        self._next = 0
        self._executor = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokentop-plots") if threaded else None
        )
        for pane in self._panes:
            pane.executor = self._executor

    def redraw(self, tick: int, *, force: bool) -> None:
        """Rebuild the next plot in turn that is shown, changed and due (`PlotPane.every_ticks`, at once when
        resized); ``force`` rebuilds every such plot now, due or not."""
        panes = self._panes
        for offset in range(len(panes)):
            index = (self._next + offset) % len(panes)
            pane = panes[index]
            if not (pane.showing and pane.stale):
                continue
            if force or pane.resized or pane.drawn_tick + pane.every_ticks <= tick:
                pane.redraw()
                pane.drawn_tick = tick
                if not force:
                    self._next = index + 1
                    break

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
