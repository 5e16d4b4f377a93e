"""The progress display of `tokentop bench` on stderr: one line built by a pure function from plain numbers.

On a terminal the line is redrawn in place (``\\r\\x1b[K``) and fitted to the terminal's width, so it never
wraps (a wrapped line cannot be redrawn in place); not on a terminal (CI, a file) a plain line every
`PLAIN_EVERY_S`. Plain ANSI and Unicode block characters: bench loads no UI library (the import-hygiene
test checks that ``tui.bench.run`` loads no textual, rich or plotext).
"""

from __future__ import annotations

import math
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Literal, TextIO

from tui.terminal import silence
from tui.units import clock, ms_figure

PLAIN_EVERY_S = 5.0
"""Not on a terminal: at most one progress line this often (plus the forced ones)."""
_EIGHTHS = " ▏▎▍▌▋▊▉"
"""Partial cells of the bar, by eighths (the full cell is █)."""
BAR_MIN, BAR_MAX = 8, 30
"""The bar's width in cells; the rest of the line gives way before it shrinks below BAR_MIN."""


@dataclass(frozen=True)
class LevelProgress:
    """What the progress line says about one moment of a level: plain numbers, no engine types."""

    index: int
    """This level's place, 1-based, of `count`."""
    count: int
    label: str
    """The level as a user says it: "8 users", "2.5 req/s"."""
    level_elapsed_s: float
    run_elapsed_s: float
    done: float
    """Progress toward the goal: requests finished in the steady window, or seconds of the level."""
    goal: float
    unit: Literal["requests", "s"]
    phase: str
    """"starting", "warming up", "steady"."""
    finished_level_s: tuple[float, ...] = ()
    """How long each earlier level took (run ETA: the remaining levels at the same per-level time)."""
    finished_wind_down_s: tuple[float, ...] = ()
    """How long each earlier level's wind-down took: after its goal, its in-flight requests finish before the
    next level starts (a level of long requests can wind down for as long as it ran)."""
    failed: int = 0
    """This level's failed requests, warm-up included (the table's ``fail`` counts its steady window only)."""
    output_tps: float = math.nan
    ttft_p50_ms: float = math.nan
    itl_p50_ms: float = math.nan
    in_flight: int = 0
    whole_answers: bool = False
    """Embeddings: the line gives req/s and the answer's latency, as there is no output to time."""
    request_per_s: float = math.nan
    e2e_p50_ms: float = math.nan


def load_label(mode: str, value: float) -> str:
    """ "1 user", "8 users", "2.5 req/s"."""
    if mode == "concurrency":
        return f"{value:g} user" + ("" if value == 1 else "s")
    if mode == "trace":
        return f"trace x{value:g}"
    return f"{value:g} req/s"


def level_eta_s(done: float, goal: float, elapsed_s: float) -> float | None:
    """Seconds left in the level at its progress rate so far; None while nothing has counted yet."""
    if done >= goal:
        return 0.0
    if done <= 0 or elapsed_s <= 0:
        return None
    return (goal - done) * elapsed_s / done


def run_eta_s(p: LevelProgress) -> float | None:
    """Seconds left in the run, an estimate: this level's ETA, then its wind-down and the remaining levels,
    each at the mean time a level has taken (the earlier ones and this one's expected total) plus the mean
    wind-down measured so far (none before the first level has wound down). None while this level's ETA is
    unknown."""
    eta = level_eta_s(p.done, p.goal, p.level_elapsed_s)
    if eta is None:
        return None
    per_level = (sum(p.finished_level_s) + p.level_elapsed_s + eta) / (len(p.finished_level_s) + 1)
    wind_downs = p.finished_wind_down_s
    wind_down = sum(wind_downs) / len(wind_downs) if wind_downs else 0.0
    return eta + wind_down + max(0, p.count - p.index) * (per_level + wind_down)


def bar(fraction: float, width: int) -> str:
    """A bar of ``width`` cells in block characters, filled to ``fraction`` (clamped to 0..1) by eighths."""
    if width <= 0:
        return ""
    f = min(1.0, max(0.0, fraction)) if math.isfinite(fraction) else 0.0
    eighths = round(f * width * 8)
    full, part = divmod(eighths, 8)
    cells = "█" * full + (_EIGHTHS[part] if part else "")
    return cells.ljust(width)


def goal_text(done: float, goal: float, unit: str) -> str:
    """ "12/40 requests", "7.5/30 s"; past the goal "45 requests (goal 40)": a steady window must also be
    long enough to measure (a second at least), which at a fast server holds more than ``--requests``."""
    if unit == "s":
        return f"{min(done, goal):.1f}/{goal:g} s"
    if done > goal:
        return f"{done:.0f} requests (goal {goal:.0f})"
    return f"{done:.0f}/{goal:.0f} requests"


def progress_line(p: LevelProgress, width: int | None = None) -> str:
    """The progress line. ``width``: the terminal's columns (the line is fitted: the figures go first, then
    the run's part, then the bar shrinks); None (not a terminal): everything, with a bar of BAR_MIN cells."""
    head = f"[{p.index}/{p.count}] {p.label}"
    fraction = p.done / p.goal if p.goal > 0 else 0.0
    eta = level_eta_s(p.done, p.goal, p.level_elapsed_s)
    level = f"{goal_text(p.done, p.goal, p.unit)} {clock(p.level_elapsed_s)}"
    level += f" ETA {clock(math.ceil(eta))}" if eta is not None else " ETA -:--"
    run_eta = run_eta_s(p)
    run = f"run {clock(p.run_elapsed_s)}" + (
        f", ~{clock(math.ceil(run_eta))} left" if run_eta is not None else ""
    )
    figures = [p.phase]
    if p.failed:
        figures.append(f"{p.failed} failed in the level")
    if p.whole_answers:
        figures.append(f"{p.request_per_s:,.1f} req/s" if math.isfinite(p.request_per_s) else "- req/s")
        figures.append(f"lat p50 {ms_figure(p.e2e_p50_ms)} ms")
    else:
        figures.append(f"{p.output_tps:,.0f} tok/s" if math.isfinite(p.output_tps) else "- tok/s")
        figures.append(f"TTFT p50 {ms_figure(p.ttft_p50_ms)} ms, ITL p50 {ms_figure(p.itl_p50_ms)} ms")
    figures.append(f"in flight {p.in_flight}")
    tails = (", ".join(figures), ", ".join(figures[:-2]), "")  # all; phase, failures and tok/s; none

    def join(bar_cells: int, with_run: bool, tail: str) -> str:
        parts = [head, f"▕{bar(fraction, bar_cells)}▏" if bar_cells else "", level]
        if with_run:
            parts.append(f"· {run}")
        if tail:
            parts.append(f"· {tail}")
        return " ".join(x for x in parts if x)

    if width is None:
        return join(BAR_MIN, True, tails[0])
    for with_run, tail in ((True, tails[0]), (True, tails[1]), (True, ""), (False, "")):
        spare = width - len(join(0, with_run, tail)) - 3  # the bar's two end marks and a space
        if spare >= BAR_MIN:
            return join(min(BAR_MAX, spare), with_run, tail)
    return join(0, False, "")[:width]


def terminal_width(stream: TextIO) -> int:
    """The columns to fill, one short of the terminal's so the cursor never wraps to the next line.
    ``$COLUMNS`` wins, then the size of the terminal the line goes to (stderr: `shutil.get_terminal_size`
    asks stdout's, and ``bench > table.txt`` has no terminal there), then shutil's answer."""
    cols = 0
    if not os.environ.get("COLUMNS"):
        try:
            cols = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            cols = 0
    if cols <= 0:
        cols = shutil.get_terminal_size(fallback=(80, 24)).columns
    return max(20, cols - 1)


@dataclass
class Progress:
    """One status line on stderr: redrawn in place on a terminal, a plain line now and then otherwise."""

    stream: TextIO
    quiet: bool
    tty: bool = field(init=False)
    _last_plain: float = field(init=False, default=-math.inf)
    _dirty: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        try:
            self.tty = self.stream.isatty()
        except (OSError, ValueError):
            self.tty = False

    def level(self, p: LevelProgress, *, force: bool = False, keep: bool = False) -> None:
        """Show a level's progress (fitted to the terminal, or plain); ``keep``: as a line that stays."""
        if self.quiet:
            return
        line = progress_line(p, terminal_width(self.stream) if self.tty else None)
        if keep:
            self.note(line)
        else:
            self.show(line, force=force)

    def show(self, text: str, *, force: bool = False) -> None:
        """A transient status: on a terminal it replaces the line; otherwise printed if forced or due."""
        if self.quiet:
            return
        try:
            if self.tty:
                self.stream.write("\r\x1b[K" + text[: terminal_width(self.stream)])
                self._dirty = True
            elif force or time.monotonic() - self._last_plain >= PLAIN_EVERY_S:
                self.stream.write(text + "\n")
                self._last_plain = time.monotonic()
            self.stream.flush()
        except (OSError, ValueError):
            self._gone()

    def note(self, text: str) -> None:
        """A line that stays (the probe's result, a finished level): on a terminal it replaces the status
        line and the next status is drawn under it."""
        if self.quiet:
            return
        try:
            self.stream.write(("\r\x1b[K" if self.tty else "") + text + "\n")
            self._dirty = False
            self._last_plain = time.monotonic()
            self.stream.flush()
        except (OSError, ValueError):
            self._gone()

    def done(self) -> None:
        """Clear the status line (before the table, an error, the end)."""
        if self._dirty and not self.quiet:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                self._gone()
            self._dirty = False

    def _gone(self) -> None:
        """Nobody reads the progress any more (``2>&1 | head``, a closed terminal): the run goes on quietly;
        a progress line is never a reason to lose what is being measured."""
        self.quiet = True
        self._dirty = False
        silence(self.stream)
