"""What the auto ramp leaves on screen when it stops (why, and the knee), and the load `k` returns to.

Pure functions over snapshots, tested without a UI. The policy itself is `tui.engine.control.ramp`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tui.engine.config import LoadTarget
from tui.engine.control.ramp import RampStep
from tui.engine.snapshot import LevelView, Snapshot


@dataclass(frozen=True)
class RampResult:
    """Why the ramp stopped and where `k` goes; shown until the next load change."""

    reason: str
    """`RampStep.reason`, one line, e.g. "knee at 4 users: 176 of a 201 tok/s peak"."""
    knee: LoadTarget | None
    """The load `k` sets: the knee, or after a failed level the last one that passed; None if neither (the
    ramp left the load paused there, so `space` resumes it too)."""

    def status(self) -> str:
        """Short, for the status bar (the reason up to its first colon; with the fix, when it is the
        client's limit)."""
        text = f"auto ramp stopped: {self.reason.split(':')[0]}"
        if self.reason.startswith("client is the limit") and "; " in self.reason:
            text += f" · {self.reason.rsplit('; ', 1)[1].split(' (')[0]}"
        return text + (f" · k → {load_label(self.knee)}" if self.knee is not None else "")

    def subtitle(self) -> str:
        """Whole, for the curve pane's bottom border (kept short: a narrow pane cuts the end off)."""
        text = f"ramp: {self.reason}"
        return text + (f" · k → {load_label(self.knee)}" if self.knee is not None else "")


def load_label(target: LoadTarget) -> str:
    """ "4 users" or "2.5 req/s": how the ramp and the table name a level."""
    if target.mode == "trace":
        return f"trace x{target.speed:g}"
    return f"{target.concurrency} users" if target.mode == "concurrency" else f"{target.rate:g} req/s"


def level_target(current: LoadTarget, level: LevelView) -> LoadTarget:
    """``current`` moved to ``level``'s mode and value, unpaused."""
    if level.mode == "concurrency":
        return replace(current, mode="concurrency", concurrency=max(1, round(level.value)), paused=False)
    if level.mode == "trace":
        return replace(current, mode="trace", speed=float(level.value), paused=False)
    return replace(current, mode="rate", rate=float(level.value), paused=False)


def ramp_result(step: RampStep) -> RampResult:
    """The result of a ramp that stopped with ``step`` (`RampPolicy.step`'s last): its line, and where `k`
    goes (the knee, or after a failed level the last that passed)."""
    return RampResult(step.reason, step.goal)


def snapshot_knee_target(snap: Snapshot | None, current: LoadTarget) -> LoadTarget | None:
    """The load of the snapshot's knee (over every level), for `k` when no ramp result is on screen."""
    if snap is None or snap.knee is None:
        return None
    level = next((lv for lv in snap.levels if lv.level_id == snap.knee.level_id), None)
    return level_target(current, level) if level is not None else None
