"""How the live app runs, apart from its engine: one frozen value that `tui.app.run`, `tui.app.watch` and
the tests build, so the app's constructor takes the engine and this."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from textual.theme import Theme

from tui.engine.config import LoadTarget
from tui.engine.sessions.baseline import Baseline


@dataclass(frozen=True)
class AppSettings:
    """The app's themes and files, its tick and clocks, the SLO lines, and whether it only watches."""

    themes: Mapping[str, Theme]
    """Every theme the `t` key cycles through, by name."""
    theme: str
    """The one to start with."""
    output: Path | None = None
    """Where `q` writes the results (None: nowhere)."""
    requests_log: Path | None = None
    """The run's ``--requests-log``, copied beside the results by `s`."""
    save_dir: Path | None = None
    """Where `s` saves (None: the working directory)."""
    tick_s: float = 0.1
    """The poll tick: how often the app reads a snapshot."""
    clock_ns: Callable[[], int] = time.perf_counter_ns
    cpu_clock_ns: Callable[[], int] = time.thread_time_ns
    """The wall and CPU clocks of the frame statistics (tests freeze them)."""
    freeze_gc: bool = False
    """Move what exists at start into the permanent generation (fewer, shorter collections while running)."""
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    slo_e2e_ms: float | None = None
    """The objectives the auto ramp measures its capacity at (None: none)."""
    slo_target: float = 0.95
    """The attainment the capacity at SLO needs (its 95 % lower bound)."""
    cost_per_hour: float | None = None
    """What the server costs per hour (USD): the level table's $/Mtok column (None: not shown)."""
    plot_thread: bool = True
    """Build plots on a background thread (tests build them inline, so a poll leaves the screen complete)."""
    watch_only: bool = False
    """`tokentop watch`: no load; only the server pane (and the status line) are shown, load keys off."""
    schedule: Sequence[tuple[float, LoadTarget]] = ()
    """(run seconds, target) to set in turn (``--schedule``); a load key ends it."""
    baseline: Baseline | None = None
    """Another run drawn beside this one (``--baseline``)."""
