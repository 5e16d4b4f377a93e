"""The only plotext importer: snapshot data in, lines of Rich segments out.

Each `Plot` owns its own plotext figure (`_figure_class`, plotext 5.3), so no plot shares plotext's
module-global state. Colours arrive as RGB triples read from the current theme's variables.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from plotext._figure import _figure_class
from rich.segment import Segment
from rich.style import Style

from tui.engine.snapshot import Histogram, LevelView
from tui.units import ms_label

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class PlotLines:
    """A built plot: one list of segments per terminal row (styles carry colours only, no background,
    so the pane's own background shows through)."""

    lines: list[list[Segment]]

    @classmethod
    def message(cls, text: str) -> PlotLines:
        return cls([[Segment(text, Style(italic=True))]] if text else [])

    @property
    def plain(self) -> str:
        return "\n".join("".join(segment.text for segment in line) for line in self.lines)


@dataclass(frozen=True)
class HistColours:
    bars: RGB
    marker: RGB
    axes: RGB


@dataclass(frozen=True)
class CurveColours:
    total: RGB
    per_request: RGB
    current: RGB
    knee: RGB
    axes: RGB


class Plot:
    """One figure, rebuilt from scratch on each draw (plotext keeps no incremental state worth reusing)."""

    def __init__(self) -> None:
        self._fig = _figure_class()

    def _reset(self, width: int, height: int, axes: RGB) -> None:
        fig = self._fig
        fig.clear_figure()
        fig.plot_size(width, height)
        fig.theme("clear")
        fig.ticks_color(axes)

    def histogram(
        self,
        hist: Histogram,
        width: int,
        height: int,
        colours: HistColours,
    ) -> PlotLines:
        """Bars over the histogram's fixed log-spaced bins, cropped to whole decades around the data so
        the axis moves only when the data crosses a decade; p50 and p99 marked by vertical lines."""
        edges, counts = hist.edges_ms, hist.counts
        if width < 20 or height < 5:
            return PlotLines.message("")
        if not counts or not any(counts) or len(edges) != len(counts) + 1:
            return PlotLines.message("no samples in this window yet")
        first = next(i for i, c in enumerate(counts) if c)
        last = len(counts) - 1 - next(i for i, c in enumerate(reversed(counts)) if c)
        lo_ms = 10 ** math.floor(math.log10(max(edges[first], 1e-6)))
        hi_ms = 10 ** math.ceil(math.log10(max(edges[last + 1], lo_ms * 10)))
        if hi_ms / lo_ms < 10:
            hi_ms = lo_ms * 10
        lo_pos = max(0.0, _position(edges, lo_ms))
        hi_pos = min(float(len(counts)), _position(edges, hi_ms))
        shown = [i for i in range(len(counts)) if i + 1 > lo_pos and i < hi_pos]
        self._reset(width, height, colours.axes)
        fig = self._fig
        # Empty bins are left out: plotext draws a zero-height bar as a one-row sliver.
        filled = [i for i in shown if counts[i]]
        fig.bar([i + 0.5 for i in filled], [counts[i] for i in filled], color=colours.bars, width=1)
        top = max(counts[i] for i in shown)
        for value in (hist.stats.p50, hist.stats.p99):
            if value == value and edges[0] <= value <= edges[-1]:
                x = _position(edges, value)
                fig.plot([x, x], [0, top], color=colours.marker, marker="│")
        ticks = _decade_ticks(lo_ms, hi_ms, width)
        fig.xticks([_position(edges, t) for t in ticks], [ms_label(t) for t in ticks])
        fig.xlim(lo_pos, hi_pos)
        y_ticks = nice_ticks(top, max(2, height // 4))
        fig.yticks(y_ticks, [_count_label(t) for t in y_ticks])
        fig.ylim(0, top)
        return ansi_to_lines(fig.build())

    def curve(
        self,
        levels: Sequence[LevelView],
        current_level_id: int,
        knee_value: float | None,
        width: int,
        height: int,
        colours: CurveColours,
        baseline: Sequence[tuple[float, float]] = (),
    ) -> PlotLines:
        """System tok/s (left axis) and per-request tok/s (right axis) against load level, one point per
        level value (the latest level at each value), with an SLO its goodput (◦, left axis); doubling ramps
        get an even log2 axis. ``baseline``:
        another run's (load, tok/s), drawn on the left axis in the axes' colour."""
        if width < 20 or height < 5:
            return PlotLines.message("")
        latest: dict[float, LevelView] = {}
        for level in sorted(levels, key=lambda lv: lv.level_id):
            if math.isfinite(level.output_tps) and level.value > 0:
                latest[level.value] = level
        points = sorted(latest.values(), key=lambda lv: lv.value)
        if not points:
            return PlotLines.message("no load level measured yet")
        base = [(v, tps) for v, tps in baseline if v > 0 and math.isfinite(tps)]
        values = sorted({p.value for p in points} | {v for v, _ in base})
        use_log = max(values) / min(values) >= 4

        def x_of(value: float) -> float:
            return math.log2(value) if use_log else value

        xs = [x_of(v) for v in values]
        xs_points = [x_of(p.value) for p in points]
        self._reset(width, height, colours.axes)
        fig = self._fig
        total = [p.output_tps for p in points]
        user = [
            (x, p.per_request_tps)
            for x, p in zip(xs_points, points, strict=True)
            if math.isfinite(p.per_request_tps)
        ]
        user_xs, user_ys = [x for x, _ in user], [y for _, y in user]
        if len(points) > 1:
            fig.plot(xs_points, total, color=colours.total, marker="braille")
        if len(user) > 1:
            fig.plot(user_xs, user_ys, color=colours.per_request, marker="braille", yside="right")
        if base:
            base_xs, base_ys = [x_of(v) for v, _ in base], [t for _, t in base]
            if len(base) > 1:
                fig.plot(base_xs, base_ys, color=colours.axes, marker="braille")
            fig.scatter(base_xs, base_ys, color=colours.axes, marker="∘")
        fig.scatter(xs_points, total, color=colours.total, marker="•")
        good = [(x, p.slo.goodput_tps) for x, p in zip(xs_points, points, strict=True)
                if p.slo is not None and math.isfinite(p.slo.goodput_tps)]  # fmt: skip
        if good:  # with an SLO: the tok/s of the requests that met it, beside the throughput
            fig.scatter([x for x, _ in good], [g for _, g in good], color=colours.total, marker="◦")
        if user:
            fig.scatter(user_xs, user_ys, color=colours.per_request, marker="·", yside="right")
        for p, x in zip(points, xs_points, strict=True):
            if p.level_id == current_level_id:
                fig.scatter([x], [p.output_tps], color=colours.current, marker="●")
        if knee_value is not None and knee_value > 0:
            kx = x_of(knee_value)
            fig.vertical_line(kx, color=colours.knee)
            fig.text("knee", kx, max(total), color=colours.knee, alignment="left")
        lo, hi = min(xs), max(xs)
        pad = (hi - lo) * 0.05 or 0.5
        fig.xlim(lo - pad, hi + pad)
        rows = max(2, height // 4)
        left_top = max(max(total), *(t for _, t in base), *(g for _, g in good), 1.0) * 1.05
        right_top = max(max(user_ys, default=1.0), 1.0) * 1.05
        left = nice_ticks(left_top, rows)
        right = nice_ticks(right_top, rows)
        fig.yticks(left, [_count_label(t) for t in left])
        fig.yticks(right, [_count_label(t) for t in right], yside="right")
        fig.ylim(0, left_top)
        fig.ylim(0, right_top, yside="right")
        tick_values = _thin(values, max(2, width // 6))
        fig.xticks([x_of(v) for v in tick_values], [f"{v:g}" for v in tick_values])
        return ansi_to_lines(fig.build())


_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_STYLES: dict[tuple[str | None, str | None], Style | None] = {(None, None): None}


def ansi_to_lines(ansi: str) -> PlotLines:
    """plotext's output as segments. plotext writes only truecolor fg/bg and resets, so this small decoder
    does in ~0.2 ms what `Text.from_ansi` (plus Textual's own conversion of a Text) does in ~3 ms."""
    lines: list[list[Segment]] = []
    fg: str | None = None
    bg: str | None = None
    for line in ansi.split("\n"):
        segments: list[Segment] = []
        pos = 0
        for match in _SGR.finditer(line):
            if match.start() > pos:
                segments.append(Segment(line[pos : match.start()], _style(fg, bg)))
            params = match.group(1).split(";")
            if params[:2] == ["38", "2"] and len(params) >= 5:
                fg = "#{:02x}{:02x}{:02x}".format(*map(int, params[2:5]))
            elif params[:2] == ["48", "2"] and len(params) >= 5:
                bg = "#{:02x}{:02x}{:02x}".format(*map(int, params[2:5]))
            elif params in (["0"], [""]):
                fg = bg = None
            pos = match.end()
        if pos < len(line):
            segments.append(Segment(line[pos:], _style(fg, bg)))
        lines.append(segments)
    return PlotLines(lines)


def _style(fg: str | None, bg: str | None) -> Style | None:
    key = (fg, bg)
    if key not in _STYLES:
        _STYLES[key] = Style(color=fg, bgcolor=bg)
    return _STYLES[key]


def nice_ticks(top: float, most: int) -> list[float]:
    """0 and 1-2-5 multiples not above `top`: about `most` labelled rows, the axis itself ends at `top`."""
    if not top > 0 or not math.isfinite(top):
        return [0.0]
    raw = top / max(1, most)
    decade = 10 ** math.floor(math.log10(raw))
    size = next(m * decade for m in (1, 2, 5, 10) if m * decade >= raw)
    return [i * size for i in range(int(top / size + 1e-9) + 1)]


def _count_label(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:g}"


def _position(edges: Sequence[float], value_ms: float) -> float:
    """Fractional bin index of a value, interpolated in log space (bins are log-spaced)."""
    if value_ms <= edges[0]:
        if edges[0] <= 0 or value_ms <= 0:
            return 0.0
        width = math.log(edges[1] / edges[0]) if len(edges) > 1 and edges[0] > 0 else 1.0
        return math.log(value_ms / edges[0]) / width
    n = len(edges) - 1
    if value_ms >= edges[-1]:
        width = math.log(edges[-1] / edges[-2]) if n >= 1 and edges[-2] > 0 else 1.0
        return n + math.log(value_ms / edges[-1]) / width
    lo, hi = 0, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if edges[mid] <= value_ms:
            lo = mid
        else:
            hi = mid
    a, b = edges[lo], edges[lo + 1]
    if a <= 0:
        return lo + (value_ms - a) / (b - a)
    return lo + math.log(value_ms / a) / math.log(b / a)


def _decade_ticks(lo_ms: float, hi_ms: float, width: int) -> list[float]:
    """1-2-5 ticks when there is room, decades otherwise."""
    decades = max(1, round(math.log10(hi_ms / lo_ms)))
    per_decade = (1.0, 2.0, 5.0) if width // (decades * 3) >= 7 else (1.0,)
    ticks = [lo_ms * 10**d * m for d in range(decades) for m in per_decade]
    ticks.append(hi_ms)
    return ticks


def _thin(values: list[float], most: int) -> list[float]:
    if len(values) <= most:
        return values
    step = math.ceil(len(values) / most)
    kept = values[::step]
    if kept[-1] != values[-1]:
        kept.append(values[-1])
    return kept
