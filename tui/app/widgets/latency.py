"""Rolling histograms of TTFT and ITL with p50/p99 marked."""

from __future__ import annotations

from functools import partial

from rich.text import Text

from tui import units
from tui.app.plotting import HistColours, PlotLines
from tui.app.widgets.plot_pane import PlotJob, PlotPane
from tui.engine.snapshot import ITL_NAMES, Histogram, ItlConvention, Snapshot


def window_label(window_s: float | None) -> str:
    return "whole run" if window_s is None else f"last {window_s:g} s"


def ttft_view(snap: Snapshot, window_s: float | None) -> tuple[str, Histogram | None]:
    """The TTFT histogram over ``window_s`` and its title; the whole run's, said so, when no first token
    arrived in the window (a closed loop of answers longer than it starts none) but some did before."""
    hist = snap.ttft_hist.get(window_s)
    title = f"TTFT · {window_label(window_s)}"
    if window_s is None or (hist is not None and hist.stats.n > 0):
        return title, hist
    whole = snap.ttft_hist.get(None)
    if whole is None or whole.stats.n == 0:
        return title, hist
    return f"TTFT · whole run (none in the {window_label(window_s)})", whole


class LatencyHistogram(PlotPane):
    """TTFT (`kind="ttft"`) or ITL (`kind="itl"`, in the chosen convention) over the chosen window."""

    every_ticks = 10
    """1 Hz: a histogram over 10 s or more changes little in half a second, and bars cost the most."""

    def __init__(self, kind: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.kind = kind
        self._hist: Histogram | None = None
        self._in_flight: int | None = None
        """Streams in flight, when the view is of whole requests (TPOT, E2E/OSL): they are not in it yet."""

    def show(self, snap: Snapshot, window_s: float | None, convention: ItlConvention) -> None:
        if self.kind == "ttft":
            title, hist = ttft_view(snap, window_s)
        else:
            hist = snap.itl_hist.get((convention, window_s))
            title = f"{ITL_NAMES[convention]} · {window_label(window_s)}"
        if self.border_title != title:
            self.border_title = title
        self._hist = hist
        whole = self.kind != "ttft" and convention != "chunk"
        self._in_flight = snap.in_flight if whole else None
        self.set_data_key((title, hist, self._in_flight))
        self.refresh_header()

    def header_lines(self) -> Text:
        stats = self._hist.stats if self._hist is not None else None
        whole = "" if self._in_flight is None else f" finished · {self._in_flight:,} in flight"
        if stats is None or stats.n == 0:
            return Text(f"n 0{whole}", style="dim")
        line = Text(no_wrap=True, overflow="ellipsis")
        for name in ("p50", "p90", "p99"):  # each with its 95 % interval, `~` and dim when it has none yet
            line.append(f"{name} ", style="dim")
            value, ci = units.ms_label(getattr(stats, name)), stats.interval(name)
            if stats.unbounded(name):
                line.append(f"~{value}  ", style="dim")
            elif ci is None:  # not judged (hand-made stats)
                line.append(f"{value}  ", style="bold")
            else:
                line.append(value, style="bold")
                line.append(f" ({units.ms_short(ci[0])}-{units.ms_short(ci[1])})  ", style="dim")
        line.append(f"mean {units.ms_label(stats.mean)}  n {stats.n:,}{whole}", style="dim")
        return line

    def plot_job(self, width: int, height: int) -> PlotJob:
        if self._hist is None:
            return partial(PlotLines.message, "no data for this window yet")
        if self._in_flight is not None and not any(self._hist.counts):
            note = f"no request finished in this window yet ({self._in_flight:,} in flight)"
            return partial(PlotLines.message, note)
        bars = "plot-ttft" if self.kind == "ttft" else "plot-itl"
        colours = HistColours(
            bars=self.colour(bars), marker=self.colour("plot-marker"), axes=self.colour("plot-axes")
        )
        return partial(self._plot.histogram, self._hist, width, height, colours)
