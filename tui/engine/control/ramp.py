"""The automatic ramp (the app's ``a`` key; usable by any face): 1, 2, 4, 8, ... until the knee or an SLO.

Pure logic over snapshots: `RampPolicy.first` gives the first target, then each `step(snapshot)` says hold
(``target=None``), go to the next level (``target``), or stop (``done``, with a one-line ``reason`` and the
`RampVerdict` to record).

A level is held until its steady-state window has enough data (`LevelView.steady` and at least
``max(min_requests, 2 x users)`` requests finished in the window; a level measured over arrivals, whose
answers outlive it, once its steady window is `ARRIVALS_HOLD_S` long), or ``hold_limit_s`` passed. Then the
ramp stops if the level failed more than ``max_error_share`` of its requests, or if the client was saturated
during it (`LevelView.client_limited`: the client is the limit, not the server), or if the levels the ramp
ran show a knee (`find_knee`), or if the next level would pass ``max_value``; otherwise it multiplies the
load by ``factor``.

While the server is away (an outage open, `tui.engine.aggregate.outages`) the ramp holds, and that time
does not count toward ``hold_limit_s``. A level whose window held an outage is judged on nothing (its
failures are the outage's, its figures part down-time): once the server is back it is run again as a
fresh level at the same load (`RampStep.again`), and left out of the ramp's levels. An outage is said only
once its failures have gone on for a second, so a level whose refused or broken requests grew in the last
`GONE_GRACE_S` is not judged yet either (up to ``hold_limit_s``: a server that keeps resetting some).

With an SLO (TTFT, TPOT, E2E) the question is the capacity at it, not the knee: a level is also held until
its attainment's 95 % interval (`LevelView.slo`, Wilson) lies on one side of ``slo_target``; the ramp goes
on past a knee while the lower bound meets the target and stops at the first level where it does not (or
is still undecided at the hold limit). It says "capacity at SLO: N users, X tok/s": the highest load whose
lower bound met the target, and the goodput of its requests that met the SLO.

Stopping ends the last level: the load pauses (a sweep that stops, as peers' do), at the knee's load (or,
after a failed level, the last that passed) so that resuming runs it. The ramp then waits until its levels
have settled (`LevelView.settled`: every request of them in, so their windows no longer move) and quotes
the knee and peak from them with the rule the results use: what it says is what the saved levels say.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tui.engine.aggregate.advice import client_limit, evidence_words
from tui.engine.aggregate.attainment import capacity_level
from tui.engine.aggregate.metrics import find_knee
from tui.engine.aggregate.outages import GONE_CLASSES, OUTAGE_AFTER_S
from tui.engine.config import LoadMode, LoadTarget
from tui.engine.control.guard import down_s_since, open_outage
from tui.engine.snapshot import Knee, LevelView, RampStop, RampVerdict, Snapshot
from tui.units import elapsed

SETTLE_LIMIT_S = 30.0
"""How long a stopped ramp waits for its levels' last requests before it quotes unsettled figures."""
ARRIVALS_HOLD_S = 5.0
"""How long a level measured over arrivals is held steady: its TTFTs, chunk gaps and tokens fill its window
from the first token, so it needs no finished request (manual: ``live``)."""

GONE_GRACE_S = 2 * OUTAGE_AFTER_S
"""How long after its last refused or broken request a level waits to be judged: long enough for those
failures to become an outage, if they are one (`OUTAGE_AFTER_S`)."""


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
    verdict: RampVerdict | None = None
    """With ``done``: what the ramp said, for the face to show and the engine to record."""
    goal: LoadTarget | None = None
    """With ``done``: the load to go back to (the knee, or the last level that passed), unpaused; None if
    there is none."""
    again: bool = False
    """With ``target``: it is the load now, to be run again as a new level (the last held an outage)."""


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
        slo_e2e_ms: float | None = None,
        slo_target: float = 0.95,
        max_error_share: float = 0.05,
        settle_limit_s: float = SETTLE_LIMIT_S,
    ) -> None:
        self.mode: LoadMode = mode
        self.value = start
        self.factor = factor
        self.max_value = max_value
        self.min_requests = min_requests
        self.hold_limit_s = hold_limit_s
        self.slo_ttft_ms = slo_ttft_ms
        self.slo_tpot_ms = slo_tpot_ms
        self.slo_e2e_ms = slo_e2e_ms
        self.slo_target = slo_target
        self.max_error_share = max_error_share
        self.settle_limit_s = settle_limit_s
        self.level_ids: list[int] = []
        """Levels this ramp ran (the knee is looked for among these only)."""
        self._held_since: float | None = None
        self._stopping: tuple[RampStop, str, int, float] | None = None
        """Once a stop was decided: why, its line, the level it stopped at, and when (run seconds)."""
        self.waiting: str | None = None
        """While the server is away: the line that says the ramp holds for it."""
        self._again: set[int] = set()
        """Levels that held an outage, run again as new ones."""
        self._gone = (0, 0, 0.0)
        """The level, its count of refused or broken requests, and when that count last grew."""

    @property
    def stopping(self) -> str | None:
        """The line of a stop decided and waiting for its levels to settle, else None."""
        return None if self._stopping is None else self._stopping[1]

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
            return self._done(snap, ("fatal", f"engine stopped: {snap.fatal}", snap.level_id), settled=False)
        if self._stopping is not None:
            return self._settle(snap)
        load = snap.load
        on_target = (
            load.mode == self.mode and not load.paused and math.isclose(load.value, round(self.value, 3))
        )
        level = next((lv for lv in snap.levels if lv.level_id == snap.level_id), None)
        if not on_target or level is None or not math.isclose(level.value, load.value):
            return RampStep(None)  # our target is not (yet) the current level
        if snap.level_id in self._again:
            return RampStep(None)  # run again: until the snapshots have its new level
        if snap.level_id not in self.level_ids:
            self.level_ids.append(snap.level_id)
            self._held_since = snap.elapsed_s
        since_s = snap.elapsed_s if self._held_since is None else self._held_since
        held_s = snap.elapsed_s - since_s - down_s_since(snap.outages, since_s, snap.elapsed_s)  # up-time
        outage = open_outage(snap.outages)
        at = named(self.mode, self.value)
        self.waiting = None
        if outage is not None:
            self.waiting = (
                f"the server stopped answering at {elapsed(outage.start_s)}: {at} held until it is back"
            )
            return RampStep(None)
        if level.down_s > 0:  # its figures are the outage's: measured again, not judged
            self.level_ids.remove(level.level_id)
            self._again.add(level.level_id)
            self._held_since = None
            why = f"the server is back: {at} measured again (level {level.level_id} held the outage)"
            return RampStep(self._target(load, self.value), reason=why, again=True)
        if level.measured_over == "arrivals":
            enough = level.steady and level.window_s >= ARRIVALS_HOLD_S
        else:
            enough = level.steady and level.window_completed + level.window_failed >= self.needed(self.value)
        if enough and self.has_slo and level.slo is not None:  # until the interval is on one side
            enough = level.slo.low >= self.slo_target or level.slo.high < self.slo_target
        if not enough and held_s < self.hold_limit_s:
            return RampStep(None)
        if self._gone_recently(level, snap.elapsed_s) and held_s < self.hold_limit_s:
            return RampStep(None)  # maybe the start of an outage: not judged on its failures (a while)
        judged = self._judge(level, self._mine(snap), snap.health.workers)
        nxt = self.value * self.factor
        if judged is None and nxt > self.max_value:
            judged = ("limit", f"reached the ramp's limit of {named(self.mode, self.max_value)}")
        if judged is not None:
            # End the level it quotes from, so that its figures stop moving; then wait for them to settle.
            self._stopping = (*judged, level.level_id, snap.elapsed_s)
            return RampStep(replace(load, paused=True), reason=f"{judged[1]}; its last requests finishing")
        self.value = nxt
        self._held_since = None
        return RampStep(self._target(load, nxt), reason=f"{at} measured; trying {nxt:g}")

    def _gone_recently(self, level: LevelView, now_s: float) -> bool:
        """``level``'s refused or broken requests grew within `GONE_GRACE_S`."""
        gone = sum(n for k, n in level.errors if k in GONE_CLASSES)
        if (level.level_id, gone) != self._gone[:2]:
            self._gone = (level.level_id, gone, now_s)
        return gone > 0 and now_s - self._gone[2] < GONE_GRACE_S

    def _mine(self, snap: Snapshot) -> list[LevelView]:
        return [lv for lv in snap.levels if lv.level_id in self.level_ids]

    def _judge(self, level: LevelView, mine: list[LevelView], workers: int) -> tuple[RampStop, str] | None:
        """Whether the ramp stops at ``level`` (the last of ``mine``), and the line that says why."""
        at = named(self.mode, level.value)
        if self.has_slo and (level.slo is None or not level.slo.low >= self.slo_target):
            return "slo", self._capacity_line(level, mine)
        total = level.window_completed + level.window_failed
        if total and level.window_failed / total > self.max_error_share:
            return "errors", f"errors at {at}: {level.window_failed}/{total} failed"
        if level.client_limited:  # the client's plateau, not the server's: more load would measure it again
            cause = level.client_limit_cause or "cpu"
            return "client", client_limit(at, workers, cause, evidence_words(level.client_evidence))
        knee = find_knee(mine)
        if knee is not None and not self.has_slo:
            return "knee", _knee_line(self.mode, knee)
        return None

    def _settle(self, snap: Snapshot) -> RampStep:
        """After the stop: hold until every level of the ramp has settled (or `settle_limit_s` passed), then
        judge its last level again on the settled figures, the ones the results will hold."""
        assert self._stopping is not None
        kind, reason, level_id, since_s = self._stopping
        mine = self._mine(snap)
        settled = bool(mine) and all(lv.settled for lv in mine)
        if not settled and snap.elapsed_s - since_s < self.settle_limit_s:
            return RampStep(None)
        level = next((lv for lv in mine if lv.level_id == level_id), None)
        judged = self._judge(level, mine, snap.health.workers) if level is not None else None
        if judged is not None:
            kind, reason = judged
        elif kind == "knee":  # rare: the knee seen while the level ran did not hold once it had ended
            at = named(self.mode, level.value) if level is not None else "its last level"
            kind, reason = "limit", f"stopped at {at}: no knee once its last requests had finished"
        return self._done(snap, (kind, reason, level_id), settled=settled)

    def _done(self, snap: Snapshot, why: tuple[RampStop, str, int | None], *, settled: bool) -> RampStep:
        """The stop, quoted from ``snap``: the verdict, and the load paused where resuming should go."""
        kind, reason, level_id = why
        mine = self._mine(snap)
        knee = find_knee(mine)
        server = [lv for lv in mine if lv.steady and math.isfinite(lv.output_tps) and not lv.client_limited]
        best = max(server, key=lambda lv: lv.output_tps, default=None)
        goal_level: LevelView | None = None
        capable = self._capable(mine) if self.has_slo else None
        if kind == "slo" and capable is not None:
            goal_level = capable
        elif knee is not None:
            goal_level = next((lv for lv in mine if lv.level_id == knee.level_id), None)
        elif kind in ("slo", "errors", "client"):
            passed = [lv for lv in mine if lv.level_id != level_id]
            goal_level = passed[-1] if passed else None
        goal = None if goal_level is None else self._target(snap.load, goal_level.value)
        verdict = RampVerdict(
            stopped_by=kind,
            reason=reason,
            mode=self.mode,
            level_ids=tuple(lv.level_id for lv in mine),
            stopped_at_level_id=level_id if level_id in self.level_ids else None,
            knee=knee,
            peak_tps=None if best is None else best.output_tps,
            peak_level_id=None if best is None else best.level_id,
            settled=settled,
            capacity_level_id=None if capable is None else capable.level_id,
            capacity_value=None if capable is None else capable.value,
            capacity_goodput_tps=None if capable is None or capable.slo is None else capable.slo.goodput_tps,
        )
        park = None if goal is None or snap.fatal else replace(goal, paused=True)
        return RampStep(park, done=True, reason=reason, verdict=verdict, goal=goal)

    @property
    def has_slo(self) -> bool:
        return any(x is not None for x in (self.slo_ttft_ms, self.slo_tpot_ms, self.slo_e2e_ms))

    def _capable(self, mine: list[LevelView]) -> LevelView | None:
        """The highest load whose attainment's lower bound meets the target."""
        return capacity_level(mine, self.slo_target)

    def _capacity_line(self, level: LevelView, mine: list[LevelView]) -> str:
        """ "capacity at SLO: 4 users, 880 tok/s (8 users: 71 % met, 95 % lower bound 64 % < 95 %)"."""
        at = named(self.mode, level.value)
        s = level.slo
        why = (
            f"{at}: no request measured"
            if s is None or not s.requests
            else f"{at}: {s.attainment * 100:.0f} % met, 95 % lower bound {s.low * 100:.0f} % < "
            f"{self.slo_target * 100:.0f} %"
        )
        best = self._capable([lv for lv in mine if lv.level_id != level.level_id])
        if best is None or best.slo is None:
            return f"capacity at SLO: none of the levels tried ({why})"
        tps = best.slo.goodput_tps
        rate = f"{tps:,.0f} tok/s" if math.isfinite(tps) else "- tok/s"
        return f"capacity at SLO: {named(self.mode, best.value)}, {rate} ({why})"


def _knee_line(mode: LoadMode, knee: Knee) -> str:
    tps = f"{knee.output_tps:,.0f} of a {knee.peak_tps:,.0f} tok/s peak"
    return f"knee at {named(mode, knee.value)}: {tps}"
