"""The curves of compared runs on one SVG plot: output tok/s against the load, one line per run. Plain
string building, like `tui.engine.results.plot` (the engine loads no plotting library)."""

from __future__ import annotations

import math
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


def nice_ticks(top: float, most: int = 6) -> list[float]:
    """Round values from 0 to ``top``: steps of 1, 2 or 5 times a power of ten, at most ``most`` of them."""
    if top <= 0:
        return [0.0]
    for step in (m * 10.0**e for e in range(math.floor(math.log10(top)) - 1, 99) for m in (1, 2, 5)):
        if top / step < most:
            return [i * step for i in range(int(top / step) + 1)]
    return [0.0, top]


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
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 12}" text-anchor="middle">load</text>',
        f'<text x="14" y="{TOP - 10}">output tok/s</text>',
    ]
    for x in sorted({x for x, _ in points}):  # a tick at each load measured
        out.append(f'<line x1="{px(x):.1f}" y1="{base}" x2="{px(x):.1f}" y2="{base + 4}" stroke="#888"/>')
        out.append(f'<text class="tick" x="{px(x):.1f}" y="{base + 17}" text-anchor="middle">{x:g}</text>')
    for y in nice_ticks(ymax):
        out.append(f'<line x1="{LEFT - 4}" y1="{py(y):.1f}" x2="{LEFT}" y2="{py(y):.1f}" stroke="#888"/>')
        out.append(f'<text class="tick" x="{LEFT - 7}" y="{py(y) + 4:.1f}" text-anchor="end">{y:,.6g}</text>')
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
