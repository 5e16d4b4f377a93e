"""A static plot of a run for reports: output throughput against concurrency and/or request rate, as SVG.

A pure function of the results model (a run just measured, or a results file read back: ``tokentop plot
results.json``), like the exports. Each load mode gets its own panel and x axis (users; requests/s): a run
that switched modes with `m` shows two curves, never a rate level placed on a users axis. Only steady levels
with a measured rate are plotted (a level too short to measure has null rates and never makes a point: its
fall would not be real); the knee is marked; under the curves a table gives each level's TTFT and ITL p50/p99,
and under it each level's TTFT, ITL (vLLM's chunk gaps) and E2E histograms as the results saved them, with p50
and p99 marked; a file from before histograms were saved gets a note instead. Plain string building (no
plotting library: plotext is the app's, and the engine loads no UI library); an SVG opens in any browser.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from tui.engine.results.files import write_atomic
from tui.engine.results.model import Histogram, Level, Mode, Results
from tui.units import ms_figure, ms_tick

WIDTH = 720
PLOT_TOP, PLOT_HEIGHT = 56, 260
PLOT_LEFT, PLOT_RIGHT = 78, 24
ROW_H = 18
TABLE_COLUMNS: tuple[tuple[str, Callable[[Level], float | None] | None], ...] = (
    ("level", None),
    ("out tok/s", lambda lv: lv.output_throughput),
    ("TTFT p50", lambda lv: lv.ttft.p50),
    ("TTFT p99", lambda lv: lv.ttft.p99),
    ("ITL p50", lambda lv: lv.itl.p50),
    ("ITL p99", lambda lv: lv.itl.p99),
    ("", None),
)
"""The table under the plot: header, the level's figure (None: made here)."""
AXIS_TITLES: dict[Mode, str] = {
    "concurrency": "concurrency (users)",
    "rate": "request rate (req/s)",
    "trace": "speed-up (trace x)",
}
"""Each mode's x axis: a panel of its own, so users and requests/s never share one."""
PANEL_GAP = 64
"""Between one mode's panel and the next (its x labels and title sit there)."""
_STYLE = (
    "text{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;fill:#222}"
    ".title{font-size:14px;font-weight:bold}.axis{stroke:#444;stroke-width:1}.grid{stroke:#ddd;stroke-width:1}"
    ".tps{fill:none;stroke:#1f77b4;stroke-width:2}.point{fill:#1f77b4}"
    ".knee{fill:none;stroke:#d62728;stroke-width:2}.kneelabel{fill:#d62728}.note{fill:#777}"
    ".bar{fill:#1f77b4;fill-opacity:.7}.frame{fill:none;stroke:#ccc;stroke-width:1}"
    ".p50{stroke:#2ca02c;stroke-width:1.5}.p99{stroke:#d62728;stroke-width:1.5}"
)
HISTOGRAMS: tuple[tuple[str, str], ...] = (("ttft", "TTFT"), ("itl", "ITL (chunk gap)"), ("e2el", "E2E"))
"""The histogram panels, left to right: the results' key (as its stats' prefix) and the panel's title."""
HIST_ROW_H, HIST_BAR_H, HIST_GAP = 52, 36, 14
"""A level's row of panels, the bars' full height in it, the space between two panels."""


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def level_value(level: Level) -> float | None:
    """A level's x: its concurrency, its request rate or its trace's speed-up."""
    return _finite(level.value)


def level_name(level: Level) -> str:
    """As the bench table names it: "c=8", "r=2.5/s", "x2"."""
    v = level_value(level)
    shown = "?" if v is None else f"{v:g}"
    if level.mode == "trace":
        return f"x{shown}"
    return f"c={shown}" if level.mode == "concurrency" else f"r={shown}/s"


def plotted_levels(results: Results, mode: Mode | None = None) -> list[Level]:
    """The levels that make a point (of ``mode``, or of every mode): steady, not too short, with a measured
    output throughput; by x."""
    out = [
        lv
        for lv in results.levels
        if (mode is None or lv.mode == mode)
        and lv.steady
        and not lv.too_short
        and _finite(lv.output_throughput) is not None
        and level_value(lv) is not None
    ]
    return sorted(out, key=lambda lv: level_value(lv) or 0.0)


def plot_modes(results: Results) -> tuple[Mode, ...]:
    """The panels: each mode the run's levels used, in the order it first ran (concurrency for none)."""
    return results.modes or ("concurrency",)


def nice_ceiling(x: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^k at least ``x`` (the y axis' top); 1 for nothing."""
    if not math.isfinite(x) or x <= 0:
        return 1.0
    base = 10.0 ** math.floor(math.log10(x))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * base >= x * (1 - 1e-12):
            return m * base
    return 10.0 * base


def x_positions(values: Sequence[float], left: float, right: float) -> tuple[list[float], bool]:
    """Pixel x of each value and whether the axis is logarithmic (values all > 0 spanning 4x or more, as a
    1,2,4,...,64 sweep does; a linear axis would crowd the small levels into one corner)."""
    if not values:
        return [], False
    lo, hi = min(values), max(values)
    log = lo > 0 and hi / lo >= 4
    if hi == lo:
        return [(left + right) / 2 for _ in values], False
    f = math.log if log else float
    a, b = f(lo), f(hi)
    return [left + (f(v) - a) / (b - a) * (right - left) for v in values], log


def _fmt(x: float | None, *, thousands: bool = False) -> str:
    if x is not None and thousands:
        return f"{x:,.0f}"
    return ms_figure(x)


def _text(x: float, y: float, s: str, *, anchor: str = "start", cls: str | None = None) -> str:
    c = f" class={quoteattr(cls)}" if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}>{escape(s)}</text>'


def throughput_svg(results: Results) -> str:
    """The SVG document (a string) of the run's throughput curves (one panel per load mode), the knee and the
    latency table."""
    levels = list(results.levels)
    modes = plot_modes(results)
    panels_h = len(modes) * PLOT_HEIGHT + (len(modes) - 1) * PANEL_GAP
    table_top = PLOT_TOP + panels_h + 64
    hist_top = table_top + ROW_H * (len(levels) + 2) + 16
    hist, hist_h = histogram_panels(levels, hist_top)
    height = hist_top + hist_h
    title = "output tok/s vs " + " and ".join(AXIS_TITLES[m].split(" ")[0] for m in modes)
    title += f": {results.target.model or '?'}"
    sub = " · ".join(x for x in (results.target.url, results.started_at) if x)
    if results.interrupted:
        sub += f" · interrupted ({results.interrupted_by or 'yes'})"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}">',
        f"<style>{_STYLE}</style>",
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        _text(PLOT_LEFT, 22, title, cls="title"),
        _text(PLOT_LEFT, 40, sub, cls="note"),
    ]
    knee_id = results.saturation.knee.level_id if results.saturation.knee is not None else None
    for k, mode in enumerate(modes):
        out.extend(_panel_svg(results, mode, PLOT_TOP + k * (PLOT_HEIGHT + PANEL_GAP), knee_id))
    out.extend(_table(levels, plotted_levels(results), table_top))
    out.extend(hist)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _panel_svg(results: Results, mode: Mode, top: float, knee_id: int | None) -> list[str]:
    """One mode's curve on its own axes: y from 0 to a round top, x its levels' users or requests/s."""
    points = plotted_levels(results, mode)
    x_title = AXIS_TITLES[mode]
    plot_right = WIDTH - PLOT_RIGHT
    bottom = top + PLOT_HEIGHT
    out = [f'<g class="panel" data-mode="{mode}">']
    tps = [_finite(lv.output_throughput) or 0.0 for lv in points]
    y_top = nice_ceiling(max(tps, default=0.0))
    for k in range(6):
        y = bottom - k / 5 * PLOT_HEIGHT
        out.append(f'<line class="grid" x1="{PLOT_LEFT}" y1="{y:.1f}" x2="{plot_right}" y2="{y:.1f}"/>')
        out.append(_text(PLOT_LEFT - 6, y + 4, f"{y_top * k / 5:,.6g}", anchor="end"))
    out.append(f'<line class="axis" x1="{PLOT_LEFT}" y1="{bottom}" x2="{plot_right}" y2="{bottom}"/>')
    out.append(f'<line class="axis" x1="{PLOT_LEFT}" y1="{top}" x2="{PLOT_LEFT}" y2="{bottom}"/>')
    out.append(
        f'<text x="18" y="{top + PLOT_HEIGHT / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 18 {top + PLOT_HEIGHT / 2:.1f})">output tok/s</text>'
    )
    xs, log = x_positions([level_value(lv) or 0.0 for lv in points], PLOT_LEFT + 24, plot_right - 24)
    ys = [bottom - t / y_top * PLOT_HEIGHT for t in tps]
    for lv, x in zip(points, xs, strict=True):  # x labels: one per plotted level
        out.append(f'<line class="axis" x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}"/>')
        out.append(_text(x, bottom + 18, f"{level_value(lv):g}", anchor="middle"))
    out.append(_text((PLOT_LEFT + plot_right) / 2, bottom + 38, x_title + (" (log scale)" if log else ""),
                     anchor="middle", cls="xtitle"))  # fmt: skip
    if points:
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=True))
        out.append(f'<polyline class="tps" data-mode="{mode}" points="{coords}"/>')
        for lv, x, y, t in zip(points, xs, ys, tps, strict=True):
            out.append(
                f'<circle class="point" data-level="{lv.level_id}" cx="{x:.1f}" cy="{y:.1f}" r="3.5">'
                f"<title>{escape(level_name(lv))}: {t:,.0f} tok/s</title></circle>"
            )
    else:
        out.append(_text((PLOT_LEFT + plot_right) / 2, top + PLOT_HEIGHT / 2,
                         "no steady level to plot", anchor="middle", cls="note"))  # fmt: skip
    for lv, x, y in zip(points, xs, ys, strict=True):
        if lv.level_id == knee_id:
            out.append(f'<circle class="knee" cx="{x:.1f}" cy="{y:.1f}" r="8"/>')
            anchor = "end" if x > (PLOT_LEFT + plot_right) / 2 else "start"
            dx = -12 if anchor == "end" else 12
            out.append(_text(x + dx, y - 10, f"knee: {level_name(lv)}", anchor=anchor, cls="kneelabel"))
    out.append("</g>")
    return out


def _table(levels: Sequence[Level], points: Sequence[Level], top: float) -> list[str]:
    """Each level's TTFT and ITL p50/p99 (ms), its throughput, and why it is not on the curve if not."""
    plotted = {id(lv) for lv in points}
    xs = [PLOT_LEFT, PLOT_LEFT + 150, PLOT_LEFT + 240, PLOT_LEFT + 330, PLOT_LEFT + 420, PLOT_LEFT + 510,
          PLOT_LEFT + 530]  # fmt: skip
    out = [_text(PLOT_LEFT, top - 8, "latencies in ms over each level's steady window", cls="note")]

    def row(y: float, cells: Sequence[str]) -> None:
        for k, (x, cell) in enumerate(zip(xs, cells, strict=True)):
            anchor = "start" if k in (0, len(cells) - 1) else "end"
            out.append(_text(x, y, cell, anchor=anchor, cls="note" if k == len(cells) - 1 else None))

    row(top + ROW_H, [name for name, _ in TABLE_COLUMNS])
    for r, lv in enumerate(levels, 2):
        cells = [level_name(lv)]
        for c, (_, figure) in enumerate(TABLE_COLUMNS[1:-1]):
            assert figure is not None
            cells.append(_fmt(_finite(figure(lv)), thousands=c == 0))
        if id(lv) in plotted:
            cells.append("")
        else:
            why = "too short" if lv.too_short else "not steady" if not lv.steady else "no rate"
            cells.append(f"(not plotted: {why})")
        row(top + r * ROW_H, cells)
    return out


def _hist(level: Level, key: str) -> tuple[list[float], list[int]] | None:
    """A level's saved histogram ``key`` as (edges, counts), None when absent or empty."""
    h: Histogram | None = None if level.histograms is None else getattr(level.histograms, key)
    if h is None or not h.total or h.check() is not None:
        return None
    edges = [_finite(e) for e in h.edges_ms]
    if any(e is None for e in edges):
        return None
    return [e for e in edges if e is not None], list(h.counts)


def histogram_panels(levels: Sequence[Level], top: float) -> tuple[list[str], float]:
    """Each level's row of TTFT, ITL and E2E histograms (a column shares one log ms axis, so a shift between
    levels shows), bars scaled to the panel's tallest; and the height they take. Drawn from the saved
    counts alone: a results file redraws the same panels."""
    rows = [lv for lv in levels if any(_hist(lv, key) for key, _ in HISTOGRAMS)]
    if not rows:
        note = "no latency histograms in these results (an older file, or nothing measured)"
        return [_text(PLOT_LEFT, top + 12, note, cls="note")], 28.0
    width = (WIDTH - PLOT_LEFT - PLOT_RIGHT - HIST_GAP * (len(HISTOGRAMS) - 1)) / len(HISTOGRAMS)
    head = "histograms in ms (log scale) over each level's window; p50 green, p99 red"
    out = [_text(PLOT_LEFT, top + 12, head, cls="note")]
    grid_top = top + 40
    for k, (key, title) in enumerate(HISTOGRAMS):
        left = PLOT_LEFT + k * (width + HIST_GAP)
        out.append(_text(left + width / 2, grid_top - 8, title, anchor="middle"))
        spans = [h[0] for h in (_hist(lv, key) for lv in rows) if h]
        positive = [e for edges in spans for e in edges if e > 0]
        lo, hi = (min(positive), max(positive)) if positive else (0.1, 1.0)
        if any(e <= 0 for edges in spans for e in edges):  # a bin from 0 (gaps of 0 ms): one bin's width
            lo /= 10**0.1
        hi = max(hi, lo * 10)
        x_of = _log_axis(lo, hi, left, width)
        for r, lv in enumerate(rows):
            out.extend(_panel(lv, key, title, x_of, left, width, grid_top + r * HIST_ROW_H))
        axis_y = grid_top + len(rows) * HIST_ROW_H
        for tick in log_ticks(lo, hi):
            x = x_of(tick)
            if not left + 10 <= x <= left + width - 10:  # its label would run into a neighbour column's
                continue
            out.append(f'<line class="axis" x1="{x:.1f}" y1="{axis_y - 12}" x2="{x:.1f}" y2="{axis_y - 8}"/>')
            out.append(_text(x, axis_y + 4, ms_tick(tick), anchor="middle", cls="note"))
    for r, lv in enumerate(rows):
        y = grid_top + r * HIST_ROW_H
        out.append(_text(PLOT_LEFT - 6, y + HIST_BAR_H / 2, level_name(lv), anchor="end"))
        n = f"n={lv.completed}"
        out.append(_text(PLOT_LEFT - 6, y + HIST_BAR_H / 2 + 14, n, anchor="end", cls="note"))
    return out, 40 + len(rows) * HIST_ROW_H + 20


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values for a log axis from ``lo`` to ``hi``: the powers of ten inside, or 1, 2, 5 x 10^k when
    fewer than two are (a histogram within one decade still gets a scale)."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for steps in ((1.0,), (1.0, 2.0, 5.0)):
        ticks = [m * 10.0**d for d in range(first, last + 1) for m in steps]
        inside = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
        if len(inside) >= 2:
            return inside
    return [lo, hi]


def _log_axis(lo: float, hi: float, left: float, width: float) -> Callable[[float], float]:
    """Pixel x of a value in ms on a log axis from ``lo`` to ``hi`` (a value at or under 0 sits at ``lo``)."""
    a, b = math.log10(lo), math.log10(hi)
    return lambda ms: left + (math.log10(max(ms, lo)) - a) / (b - a) * width


def _panel(
    lv: Level,
    key: str,
    title: str,
    x_of: Callable[[float], float],
    left: float,
    width: float,
    y: float,
) -> list[str]:
    """One level's histogram of ``key``: a frame, a bar per bin, the p50 and p99 marks."""
    h = _hist(lv, key)
    n = 0 if h is None else sum(h[1])
    out = [
        f'<g class="hist" data-level="{lv.level_id}" data-metric="{key}" data-n="{n}">',
        f'<rect class="frame" x="{left:.1f}" y="{y:.1f}" width="{width:.1f}" height="{HIST_BAR_H}"/>',
    ]
    if h is not None:
        edges, counts = h
        tallest = max(counts)
        base = y + HIST_BAR_H
        for e0, e1, c in zip(edges, edges[1:], counts, strict=False):
            if c:
                x0, x1 = x_of(e0), x_of(e1)
                bar_h = c / tallest * (HIST_BAR_H - 2)
                tip = f"{level_name(lv)} {title} {e0:.4g}-{e1:.4g} ms: {c}"
                out.append(
                    f'<rect class="bar" data-count="{c}" x="{x0:.1f}" y="{base - bar_h:.1f}" '
                    f'width="{max(x1 - x0 - 0.5, 0.5):.1f}" height="{bar_h:.1f}">'
                    f"<title>{escape(tip)}</title></rect>"
                )
        for stat in ("p50", "p99"):
            v = _finite(getattr(getattr(lv, key), stat))
            if v is not None:
                x = x_of(v)
                out.append(f'<line class="{stat}" x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{base:.1f}"/>')
    else:
        out.append(_text(left + width / 2, y + HIST_BAR_H / 2 + 4, "no samples", anchor="middle", cls="note"))
    out.append("</g>")
    return out


def write_plot(results: Results, path: Path) -> Path:
    """Write the SVG (UTF-8) to ``path``, replaced atomically like the results file."""
    return write_atomic(path, throughput_svg(results).encode())
