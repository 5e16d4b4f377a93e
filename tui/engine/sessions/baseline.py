"""A baseline for the live app (``--baseline SESSION_OR_RESULTS``): another run's levels, by load, so the
curve pane can draw its curve beside the live one and each level row can say how it differs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tui.engine.sessions.compare import load_key, load_run
from tui.engine.snapshot import LevelView


class Baseline:
    """The levels of one earlier run (a session replayed to its end, or a results file)."""

    def __init__(self, path: Path, levels: list[dict[str, Any]]) -> None:
        self.path = path
        self._by_load = {load_key(lv): lv for lv in levels}

    @classmethod
    def load(cls, path: Path) -> Baseline:
        """`SessionError` (one line) for a file that is neither a session nor a results file."""
        run = load_run(Path(path), samples=False)
        return cls(Path(path), run.levels())

    def points(self, mode: str) -> list[tuple[float, float]]:
        """(load, output tok/s) of each of its levels in ``mode`` with a measured rate, by load."""
        out = []
        for (m, value), lv in self._by_load.items():
            tps = lv.get("output_throughput")
            if m == mode and isinstance(tps, int | float) and math.isfinite(tps) and value > 0:
                out.append((value, float(tps)))
        return sorted(out)

    def level_for(self, level: LevelView) -> dict[str, Any] | None:
        """Its level at the same load as ``level`` (same mode and value), or None."""
        return self._by_load.get((level.mode, float(level.value)))


def percent_change(base: Any, now: float) -> float | None:
    """(now - base) / base in percent, or None where either is missing or the base is 0."""
    if not isinstance(base, int | float) or not math.isfinite(base) or base == 0 or not math.isfinite(now):
        return None
    return (now - base) / base * 100
