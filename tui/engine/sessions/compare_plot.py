"""The curves of compared runs on one SVG plot: output tok/s against the load, one line per run. Plain
string building, like `tui.engine.results.plot` (the engine loads no plotting library)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 640, 360
LEFT, TOP, RIGHT, BOTTOM = 70, 30, 20, 50
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


BAR_WIDTH = 40


def curves_text(curves: Sequence[dict[str, Any]]) -> str:
    """The same curves in the terminal: per load, one bar of output tok/s per run, on one scale."""
    names = [Path(c["path"]).name for c in curves]
    by_load: dict[float, list[float | None]] = {}
    for i, curve in enumerate(curves):
        for x, y in curve["points"]:
            by_load.setdefault(x, [None] * len(curves))[i] = y
    top = max((y for ys in by_load.values() for y in ys if y is not None), default=0.0)
    if top <= 0:
        return "no levels to plot"
    lines = ["output tok/s by load: " + ", ".join(f"{'#=+*%'[i % 5]} {n}" for i, n in enumerate(names))]
    for x in sorted(by_load):
        for i, y in enumerate(by_load[x]):
            label = f"{x:>8g}" if i == 0 else " " * 8
            bar = "" if y is None else "#=+*%"[i % 5] * max(1, round(y / top * BAR_WIDTH))
            value = "-" if y is None else f"{y:,.0f}"
            lines.append(f"{label} {bar} {value}")
    return "\n".join(lines)


def curves_svg(curves: Sequence[dict[str, Any]]) -> str:
    """``curves``: each ``{"path": ..., "points": [(load, tok/s or None), ...]}`` (`compare.comparison`)."""
    points = [(x, y) for c in curves for x, y in c["points"] if y is not None]
    head = f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-size="12">'
    if not points:
        return f'{head}<text x="10" y="30">no levels to plot</text></svg>\n'
    xmax = max(x for x, _ in points) or 1.0
    ymax = max(y for _, y in points) or 1.0

    def px(x: float) -> float:
        return LEFT + x / xmax * (WIDTH - LEFT - RIGHT)

    def py(y: float) -> float:
        return HEIGHT - BOTTOM - y / ymax * (HEIGHT - TOP - BOTTOM)

    base = HEIGHT - BOTTOM
    out = [
        head,
        f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}" stroke="#888"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}" stroke="#888"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 12}" text-anchor="middle">load (max {xmax:g})</text>',
        f'<text x="14" y="{TOP - 10}">output tok/s (max {ymax:.0f})</text>',
    ]
    for i, curve in enumerate(curves):
        colour = COLOURS[i % len(COLOURS)]
        pts = [(x, y) for x, y in curve["points"] if y is not None]
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{line}"/>')
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>' for x, y in pts]
        name = escape(Path(curve["path"]).name)
        out.append(f'<text x="{LEFT + 10}" y="{TOP + 16 * (i + 1)}" fill="{colour}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
