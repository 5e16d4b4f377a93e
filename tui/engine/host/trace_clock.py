"""The trace replay's one timeline, kept by the handle for every worker: where the replay is in the trace
now, at what speed. Each change of target re-anchors it where it is, so the speed knob bends the timeline
without a jump, and a pause holds the replay's place until it resumes."""

from __future__ import annotations

from tui.engine.config import LoadTarget
from tui.engine.load.split import TracePlace

START_LEAD_NS = 20_000_000
"""A new speed takes effect this long after the handle says so, so every worker has its share before the
first send under it (a share reaches a busy worker a few ms after it is sent)."""
FIRST_START_NS = 250_000_000
"""The replay's first request is due this long after every worker has reported: a worker's first moments
(its first batch, the first requests' code paths) made the first few sends 17-23 ms late at 20 ms."""


class TraceClock:
    """Not started until `start` (the workers are all up); `place` is what each share carries."""

    def __init__(self) -> None:
        self.anchor_ns: int | None = None
        self.pos_ns = 0
        self.speed = 1.0
        self.running = False
        self.epoch = 0

    def position_ns(self, now_ns: int) -> int:
        """Nanoseconds into the trace at ``now_ns``."""
        if self.anchor_ns is None or not self.running:
            return self.pos_ns
        return self.pos_ns + max(0, round((now_ns - self.anchor_ns) * self.speed))

    def start(self, now_ns: int, target: LoadTarget) -> None:
        """Every worker is up: the replay begins shortly, at the target's speed (held if it is paused)."""
        if self.anchor_ns is not None:
            return
        self.anchor_ns = now_ns + FIRST_START_NS
        self.speed = target.speed
        self.running = not target.paused

    def retarget(self, target: LoadTarget, now_ns: int, *, new_level: bool) -> None:
        """The target changed at ``now_ns``: go on from where the replay is (from the start, in a new epoch,
        for a new level whose target asks for it). A running replay changes `START_LEAD_NS` from now, so
        the workers have the new share before its first send; up to then the old timeline holds."""
        started = self.anchor_ns is not None
        at_ns = now_ns + START_LEAD_NS if started and not target.paused else now_ns
        pos = self.position_ns(at_ns)
        if new_level and target.from_start:
            pos = 0
            self.epoch += 1
        self.pos_ns = pos
        self.speed = target.speed
        self.running = not target.paused
        if started:
            self.anchor_ns = at_ns

    def place(self) -> TracePlace:
        return TracePlace(self.anchor_ns, self.pos_ns, self.epoch)
