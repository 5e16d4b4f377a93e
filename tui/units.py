"""Times, rates and sizes as text, for every face: one place, so a latency reads the same in the table,
the progress line, the live panes and the saved plot. UI-free (plain strings), so bench and the results
plot use it without a terminal library."""

from __future__ import annotations

import math


def ms_figure(value_ms: float | None) -> str:
    """A latency in a table of milliseconds, three significant figures at most: 0.85, 12.3, 123; "-" when
    there is none (NaN or None)."""
    if value_ms is None or not math.isfinite(value_ms):
        return "-"
    x = value_ms
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def ms_label(value_ms: float) -> str:
    """A latency with its unit in few characters: 850us, 12ms, 1.2s."""
    if not math.isfinite(value_ms):
        return "-"
    if value_ms < 1:
        return f"{value_ms * 1000:.0f}us"
    if value_ms < 1000:
        return f"{value_ms:.0f}ms" if value_ms >= 10 else f"{value_ms:.1f}ms"
    return f"{value_ms / 1000:.1f}s" if value_ms < 10_000 else f"{value_ms / 1000:.0f}s"


def ms_short(value_ms: float) -> str:
    """A latency in a column already headed "ms", as short as stays readable: 2.5, 95, 1.2s."""
    if not math.isfinite(value_ms):
        return "-"
    if value_ms < 10:
        return f"{value_ms:.1f}"
    if value_ms < 1000:
        return f"{value_ms:.0f}"
    return f"{value_ms / 1000:.1f}s"


def ms_tick(value_ms: float) -> str:
    """An axis tick of milliseconds, three significant figures: 0.5, 120, 2.5 s."""
    return f"{value_ms / 1000:.3g} s" if value_ms >= 1000 else f"{value_ms:.3g}"


def figure(value: float | None) -> str:
    """A figure of any unit in a comparison: four significant digits, whole with separators from 10,000;
    "-" when there is none."""
    if value is None:
        return "-"
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def rate(value: float, digits: int = 1) -> str:
    """A throughput with thousands separators; "-" while there is nothing to divide."""
    return f"{value:,.{digits}f}" if math.isfinite(value) else "-"


def dollars(usd: float | None) -> str:
    """ "$1.38", "$0.0042" (two significant digits below a dime); "-" for no price."""
    if usd is None or not math.isfinite(usd):
        return "-"
    return f"${usd:,.2f}" if usd >= 0.1 else f"${usd:.4f}"


def elapsed(seconds: float) -> str:
    """Time since a start, as a clock with two-digit minutes: 00:37, 1:02:05."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def clock(seconds: float) -> str:
    """A duration or an ETA as m:ss (h:mm:ss past an hour); "-:--" when unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "-:--"
    total = int(seconds)
    h, rest = divmod(total, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"
