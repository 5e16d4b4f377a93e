"""The load the app sets by itself: a `--schedule`'s targets at their times and the `a` key's ramp, whose
result stays on screen and is where `k` goes. Its own state and rules, apart from the app's keys and panes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from tui.app.ramp_result import RampResult, ramp_result, snapshot_knee_target
from tui.engine.config import LoadTarget
from tui.engine.control.ramp import RampPolicy, RampStep
from tui.engine.snapshot import RampVerdict, Snapshot


class AutoLoad:
    """Sets targets through ``set_target`` (the app's, as the ramp's own), says what happens through
    ``notify(message, title=...)``, hands a finished ramp's verdict to ``record_ramp`` and a changed result
    to ``on_result`` (the app shows it on the curve and offers `k`)."""

    def __init__(
        self,
        schedule: Sequence[tuple[float, LoadTarget]],
        *,
        slo_ttft_ms: float | None,
        slo_tpot_ms: float | None,
        slo_e2e_ms: float | None = None,
        slo_target: float = 0.95,
        set_target: Callable[[LoadTarget], None],
        notify: Callable[..., object],
        record_ramp: Callable[[RampVerdict], None],
        on_result: Callable[[RampResult | None], None],
    ) -> None:
        self._schedule = list(schedule)
        self._slo_ttft_ms = slo_ttft_ms
        self._slo_tpot_ms = slo_tpot_ms
        self._slo = (slo_e2e_ms, slo_target)
        self._set_target = set_target
        self._notify = notify
        self._record_ramp = record_ramp
        self._on_result = on_result
        self.ramp: RampPolicy | None = None
        """The running ramp, None when none runs."""
        self._note = ""
        self.result: RampResult | None = None
        """Why the last ramp stopped and where `k` goes; on screen until the next load change."""

    def status(self) -> str:
        """The status line's ramp part: its progress while it runs, else its result while on screen."""
        return self._note or (self.result.status() if self.result is not None else "")

    def tick(self, snap: Snapshot) -> None:
        """The ramp's next step and the schedule's due targets, once per snapshot."""
        if self.ramp is not None:
            self._ramp_tick(snap)
        if self._schedule:
            self._schedule_tick(snap)

    def load_key(self) -> None:
        """A load key was pressed: the keys own the load again; the schedule, the ramp and its result end."""
        if self._schedule:
            self._schedule.clear()
            self._notify("schedule stopped by a load key", title="schedule")
        if self.ramp is not None:
            self._stop_ramp("stopped by a load key")
        self._show_result(None)

    def toggle_ramp(self, current: LoadTarget) -> None:
        """`a`: start a ramp in the current mode (1, 2, 4, ... users, or 1, 2, 4, ... req/s), or stop it."""
        if self.ramp is not None:
            self._stop_ramp("stopped")
            return
        self.ramp = RampPolicy(
            mode=current.mode,
            slo_ttft_ms=self._slo_ttft_ms,
            slo_tpot_ms=self._slo_tpot_ms,
            slo_e2e_ms=self._slo[0],
            slo_target=self._slo[1],
        )
        self._note = self._progress()
        self._set_target(self.ramp.first(current))

    def knee_goal(self, snap: Snapshot | None, current: LoadTarget) -> LoadTarget | None:
        """Where `k` sets the load: the ramp's result while on screen, else the measured knee."""
        if self.result is not None and self.result.knee is not None:
            return self.result.knee
        return snapshot_knee_target(snap, current)

    def _schedule_tick(self, snap: Snapshot) -> None:
        """Set each scheduled target whose time has come (the last one due, if several are)."""
        due = None
        while self._schedule and self._schedule[0][0] <= snap.elapsed_s:
            due = self._schedule.pop(0)[1]
        if due is not None:
            self._set_target(due)
            if not self._schedule:
                self._notify("the schedule is done; the keys set the load again", title="schedule")

    def _progress(self) -> str:
        assert self.ramp is not None
        if self.ramp.stopping is not None:
            return f"auto ramp stopping: {self.ramp.stopping.split(':')[0]} · settling"
        if self.ramp.waiting is not None:
            return f"auto ramp: {self.ramp.waiting}"
        unit = {"concurrency": "users", "trace": "x speed"}.get(self.ramp.mode, "req/s")
        return f"auto ramp: {self.ramp.value:g} {unit}, holding until steady"

    def _ramp_tick(self, snap: Snapshot) -> None:
        assert self.ramp is not None
        decision = self.ramp.step(snap)
        if decision.again and decision.target is not None:  # the same load as a new level: end the old
            self._set_target(replace(decision.target, paused=True))
            self._notify(f"auto ramp: {decision.reason}", title="ramp")
        if decision.target is not None:  # the next level, or the load paused where the ramp stops
            self._set_target(decision.target)
        if decision.done:
            self._stop_ramp(decision.reason, decision)
        if self.ramp is not None:
            self._note = self._progress()

    def _stop_ramp(self, reason: str, step: RampStep | None = None) -> None:
        """End the ramp; when it stopped by itself (``step`` given) the engine records what it said, and its
        result stays on screen."""
        self.ramp = None
        self._note = ""
        if step is not None:
            if step.verdict is not None:
                self._record_ramp(step.verdict)
            self._show_result(ramp_result(step))
        self._notify(f"auto ramp: {reason}", title="ramp")

    def _show_result(self, result: RampResult | None) -> None:
        if result is None and self.result is None:
            return
        self.result = result
        self._on_result(result)
