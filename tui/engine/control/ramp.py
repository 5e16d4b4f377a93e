"""The automatic ramp (the app's ``a`` key; usable by any face): 1, 2, 4, 8, ... until the knee or an SLO.

Pure logic over snapshots: `RampPolicy.first` gives the first target, then each `step(snapshot)` says hold
(``target=None``), go to the next level (``target``), or stop (``done``, with a one-line ``reason``).

A level is held until its steady-state window has enough data (`LevelView.steady` and at least
``max(min_requests, 2 x users)`` requests finished in the window; a level measured over arrivals, whose
answers outlive it, once its steady window is `ARRIVALS_HOLD_S` long), or ``hold_limit_s`` passed. Then the
ramp stops if the level broke an SLO (p99 TTFT / p99 TPOT over the window) or failed more than
``max_error_share`` of its requests, or if the client was saturated during it (`LevelView.client_limited`:
the client is the limit, not the server), or if the levels the ramp ran show a knee (`find_knee`), or if the
next level would pass ``max_value``; otherwise it multiplies the load by ``factor``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tui.engine.aggregate.metrics import find_knee
from tui.engine.config import LoadMode, LoadTarget
from tui.engine.control.advice import client_limit
from tui.engine.snapshot import LevelView, Snapshot

ARRIVALS_HOLD_S = 5.0
"""How long a level measured over arrivals is held steady: its TTFTs, chunk gaps and tokens fill its window
from the first token, so it needs no finished request (manual: ``live``)."""


def named(mode: LoadMode, value: float) -> str:
    """A level's load as the ramp's lines say it: "4 users", "2.5 req/s", "speed x8"."""
    if mode == "trace":
        return f"speed x{value:g}"
    return f"{value:g} {'users' if mode == 'concurrency' else 'req/s'}"


@dataclass(frozen=True)
class RampStep:
    """What to do now."""

    target: LoadTarget | None
    """The load to set now, or None to keep the current one."""
    done: bool = False
    reason: str = ""


class RampPolicy:
    """Doubling ramp; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        mode: LoadMode = "concurrency",
        start: float = 1,
        factor: float = 2.0,
        max_value: float = 1024,
        min_requests: int = 10,
        hold_limit_s: float = 120.0,
        slo_ttft_ms: float | None = None,
        slo_tpot_ms: float | None = None,
        max_error_share: float = 0.05,
    ) -> None:
        self.mode: LoadMode = mode
        self.value = start
        self.factor = factor
        self.max_value = max_value
        self.min_requests = min_requests
        self.hold_limit_s = hold_limit_s
        self.slo_ttft_ms = slo_ttft_ms
        self.slo_tpot_ms = slo_tpot_ms
        self.max_error_share = max_error_share
        self.level_ids: list[int] = []
        """Levels this ramp ran (the knee is looked for among these only)."""
        self._held_since: float | None = None

    def first(self, current: LoadTarget) -> LoadTarget:
        """The target that starts the ramp."""
        return self._target(current, self.value)

    def _target(self, current: LoadTarget, value: float) -> LoadTarget:
        if self.mode == "concurrency":
            return replace(current, mode="concurrency", concurrency=max(1, round(value)), paused=False)
        if self.mode == "trace":
            return replace(current, mode="trace", speed=float(value), from_start=False, paused=False)
        return replace(current, mode="rate", rate=float(value), paused=False)

    def needed(self, value: float) -> int:
        """Requests the steady window must hold before the ramp moves on from ``value``."""
        return max(self.min_requests, math.ceil(2 * value))

    def step(self, snap: Snapshot) -> RampStep:
        """Decide from the latest snapshot."""
        if snap.fatal:
            return RampStep(None, done=True, reason=f"engine stopped: {snap.fatal}")
        load = snap.load
        on_target = (
            load.mode == self.mode and not load.paused and math.isclose(load.value, round(self.value, 3))
        )
        level = next((lv for lv in snap.levels if lv.level_id == snap.level_id), None)
        if not on_target or level is None or not math.isclose(level.value, load.value):
            return RampStep(None)  # our target is not (yet) the current level
        if snap.level_id not in self.level_ids:
            self.level_ids.append(snap.level_id)
            self._held_since = snap.elapsed_s
        held_s = snap.elapsed_s - (self._held_since or snap.elapsed_s)
        if level.measured_over == "arrivals":
            enough = level.steady and level.window_s >= ARRIVALS_HOLD_S
        else:
            enough = level.steady and level.window_completed + level.window_failed >= self.needed(self.value)
        if not enough and held_s < self.hold_limit_s:
            return RampStep(None)
        at = named(self.mode, self.value)
        breach = self._slo_breach(level)
        if breach:
            return RampStep(None, done=True, reason=f"SLO broken at {at}: {breach}")
        total = level.window_completed + level.window_failed
        if total and level.window_failed / total > self.max_error_share:
            return RampStep(None, done=True, reason=f"errors at {at}: {level.window_failed}/{total} failed")
        if level.client_limited:  # the client's plateau, not the server's: more load would measure it again
            return RampStep(
                None,
                done=True,
                reason=client_limit(at, snap.health.workers, level.client_limit_cause or "cpu"),
            )
        mine = [lv for lv in snap.levels if lv.level_id in self.level_ids]
        knee = find_knee(mine)
        if knee is not None:
            tps = f"{knee.output_tps:,.0f} of a {knee.peak_tps:,.0f} tok/s peak"
            return RampStep(None, done=True, reason=f"knee at {named(self.mode, knee.value)}: {tps}")
        nxt = self.value * self.factor
        if nxt > self.max_value:
            return RampStep(
                None, done=True, reason=f"reached the ramp's limit of {named(self.mode, self.max_value)}"
            )
        self.value = nxt
        self._held_since = None
        return RampStep(self._target(load, nxt), reason=f"{at} measured; trying {nxt:g}")

    def _slo_breach(self, level: LevelView) -> str:
        if self.slo_ttft_ms is not None and level.ttft.n and level.ttft.p99 > self.slo_ttft_ms:
            return f"TTFT p99 {level.ttft.p99:.0f} ms > {self.slo_ttft_ms:g} ms"
        if self.slo_tpot_ms is not None and level.tpot.n and level.tpot.p99 > self.slo_tpot_ms:
            return f"TPOT p99 {level.tpot.p99:.1f} ms > {self.slo_tpot_ms:g} ms"
        return ""
