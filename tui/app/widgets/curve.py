"""Throughput against load: a live tok/s gauge over the curve of one point per load level."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import ClassVar

from rich.text import Text

from tui import units
from tui.app.plotting import CurveColours
from tui.app.widgets.plot_pane import PlotJob, PlotPane
from tui.app.widgets.styles import ComponentStyles
from tui.engine.snapshot import Knee, LevelView, Snapshot


class ThroughputCurve(PlotPane):
    """System output tok/s and per-request tok/s per level; the knee marked; x is users or req/s."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "curve--gauge",
        "curve--gauge-empty",
        "curve--total",
        "curve--per-request",
        "curve--knee",
        "curve--baseline",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._levels: tuple[LevelView, ...] = ()
        self._level_id = -1
        self._knee: Knee | None = None
        self._tps = 0.0
        self._mode = "concurrency"
        self.baseline: Callable[[str], list[tuple[float, float]]] | None = None
        """``--baseline`` (or ``--ab``'s B): its (load, tok/s) points in a mode, drawn as a second series."""
        self._baseline: tuple[tuple[float, float], ...] = ()
        self.names = ("total", "baseline")
        """The legend's names of this run's series and the second one (``("A", "B")`` with ``--ab``)."""
        self.component_style = ComponentStyles(self)

    def show(self, snap: Snapshot) -> None:
        self._mode = snap.load.mode
        self._levels = tuple(lv for lv in snap.levels if lv.mode == self._mode)
        self._level_id = snap.level_id
        knee = snap.knee
        self._knee = (
            knee if knee is not None and any(lv.level_id == knee.level_id for lv in self._levels) else None
        )
        self._tps = snap.output_tps
        self._baseline = tuple(self.baseline(self._mode)) if self.baseline is not None else ()
        title = "tok/s vs " + {"concurrency": "users (concurrency)", "trace": "speed-up (trace x)"}.get(
            self._mode, "offered req/s"
        )
        if self.border_title != title:
            self.border_title = title
        self.set_data_key((self._levels, self._level_id, self._knee, self._baseline))
        self.refresh_header()

    def set_note(self, note: str) -> None:
        """A line on the bottom border (the auto ramp's result), "" for none."""
        if self.border_subtitle != note:
            self.border_subtitle = note

    def header_lines(self) -> Text:
        rates = [self._tps, *(lv.output_tps for lv in self._levels)]
        peak = max((r for r in rates if math.isfinite(r)), default=0.0)
        now = self._tps if math.isfinite(self._tps) else 0.0
        value = f" {units.rate(self._tps)}"
        rest = f" tok/s  peak {peak:,.0f}"
        cells = max(8, self.content_size.width - 4 - len(value) - len(rest))
        filled = min(cells, round(cells * now / peak)) if peak > 0 else 0
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("now ")
        line.append("█" * filled, style=self.component_style("curve--gauge"))
        line.append("░" * (cells - filled), style=self.component_style("curve--gauge-empty"))
        line.append(value, style="bold")
        line.append(rest, style="dim")
        legend = Text(no_wrap=True, overflow="ellipsis")
        legend.append(f"• {self.names[0]} tok/s (left)", style=self.component_style("curve--total"))
        legend.append("  ")
        legend.append("· per req (right)", style=self.component_style("curve--per-request"))
        if any(lv.slo is not None for lv in self._levels):
            legend.append("  ◦ goodput", style=self.component_style("curve--total"))
        if self.baseline is not None:
            legend.append(f"  ∘ {self.names[1]}", style=self.component_style("curve--baseline"))
        if self._knee is not None:
            unit = {"concurrency": "users", "trace": "x speed"}.get(self._mode, "req/s")
            knee_style = self.component_style("curve--knee")
            legend.append(f"  │ knee {self._knee.value:g} {unit}", style=knee_style)
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append_text(line)
        out.append("\n")
        out.append_text(legend)
        return out

    def plot_job(self, width: int, height: int) -> PlotJob:
        colours = CurveColours(
            total=self.colour("plot-curve"),
            per_request=self.colour("plot-curve-2"),
            current=self.colour("plot-marker"),
            knee=self.colour("plot-knee"),
            axes=self.colour("plot-axes"),
        )
        knee = self._knee.value if self._knee is not None else None
        return partial(
            self._plot.curve, self._levels, self._level_id, knee, width, height, colours, self._baseline
        )
