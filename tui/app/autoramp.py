"""The `a` key's automatic ramp: 1, 2, 4, ... users, each held until its level is steady.

A small internal policy until the engine's own (`tui.engine.ramp`) lands; it reads only the snapshot,
so swapping it is a one-line change in the app.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tui.engine.config import LoadTarget
from tui.engine.snapshot import Snapshot

MAX_ERROR_SHARE = 0.05
"""Stop when more than this share of a level's requests failed (the SLO we can check without flags)."""


@dataclass(frozen=True)
class RampStep:
    target: LoadTarget | None
    """The load to set now, or None to keep the current one."""
    done: bool = False
    reason: str = ""


class AutoRamp:
    """Doubling closed-loop ramp; stops at the knee, on errors, or at `max_users`."""

    def __init__(self, *, start_users: int = 1, max_users: int = 1024, hold_limit_s: float = 120.0) -> None:
        self.users = start_users
        self.max_users = max_users
        self.hold_limit_s = hold_limit_s
        self._level_seen_at: float | None = None

    def first(self, current: LoadTarget) -> LoadTarget:
        return replace(current, mode="concurrency", concurrency=self.users, paused=False)

    def step(self, snap: Snapshot) -> RampStep:
        if snap.fatal:
            return RampStep(None, done=True, reason="engine stopped")
        level = next((lv for lv in snap.levels if lv.level_id == snap.level_id), None)
        on_target = snap.load.mode == "concurrency" and snap.load.concurrency == self.users
        if level is None or not on_target or level.value != self.users:
            return RampStep(None)
        if self._level_seen_at is None:
            self._level_seen_at = snap.elapsed_s
        held_s = snap.elapsed_s - self._level_seen_at
        if not level.steady and held_s < self.hold_limit_s:
            return RampStep(None)
        total = level.completed + level.failed
        if total and level.failed / total > MAX_ERROR_SHARE:
            return RampStep(
                None, done=True, reason=f"errors: {level.failed}/{total} failed at {self.users} users"
            )
        if snap.knee is not None:
            return RampStep(None, done=True, reason=f"knee at {snap.knee.value:g} users ({snap.knee.rule})")
        if self.users * 2 > self.max_users:
            return RampStep(None, done=True, reason=f"reached {self.users} users")
        self.users *= 2
        self._level_seen_at = None
        return RampStep(replace(snap.load, concurrency=self.users, paused=False))
