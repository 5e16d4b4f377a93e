"""An `Engine` for the faces' tests: each level follows a small frozen script, nothing runs.

Every `snapshot()` moves the current level one step along `SCRIPT` (warming up, then steady with more
requests done), so a face polling it sees a level start, settle and finish, in milliseconds and always
the same way. Results are built from plain data with the real `build_results`, as a replay would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tui.engine.aggregate.metrics import find_knee
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.config_record import run_info
from tui.engine.results.build import ClientSummary, LevelExtras, build_results
from tui.engine.results.files import write_results
from tui.engine.results.model import Results
from tui.engine.snapshot import LevelView, Outage, RampVerdict, RequestDetail, Snapshot, Stats

SCRIPT: tuple[tuple[bool, int], ...] = ((False, 0), (True, 2), (True, 5))
"""(steady, requests done in the steady window) after the level's 1st, 2nd, 3rd... snapshot."""
CAPACITY_TPS = 100.0
"""Output tokens/s stop growing at 2 users (50 tok/s each): the knee is at 2."""


def _stats(p50_ms: float) -> Stats:
    return Stats(n=5, mean=p50_ms, std=p50_ms / 10, min=p50_ms / 2, max=p50_ms * 2, p50=p50_ms,
                 p90=p50_ms * 1.5, p95=p50_ms * 1.7, p99=p50_ms * 2)  # fmt: skip


@dataclass
class _Level:
    level_id: int
    load: LoadTarget
    started_s: float
    steps: int = 0
    ended_s: float | None = None
    failing: bool = False
    """Every request of this level fails (one per snapshot, HTTP 500)."""
    down_steps: int = 0
    """The level starts inside an outage that lasts this many snapshots (a connect failure each); the
    script then runs as usual."""

    @property
    def down(self) -> bool:
        return self.steps <= self.down_steps and self.down_steps > 0

    def view(self) -> LevelView:
        up = max(0, self.steps - self.down_steps)
        steady, done = SCRIPT[min(up, len(SCRIPT)) - 1] if up else (False, 0)
        if self.down_steps and up:
            done = max(done, 1)  # the answer that ended the outage
        failed = self.steps if self.failing else min(self.steps, self.down_steps)
        if self.failing:
            steady, done = False, 0
        error = "connect" if self.down_steps else "http_5xx"
        users = self.load.value
        tps = min(50.0 * users, CAPACITY_TPS)
        return LevelView(
            level_id=self.level_id,
            mode=self.load.mode,
            value=users,
            started_s=self.started_s,
            ended_s=self.ended_s,
            steady_from_s=self.started_s if steady else None,
            steady=steady,
            completed=done,
            failed=failed,
            output_tps=tps,
            request_per_s=tps / 16,
            per_request_tps=tps / users,
            ttft=_stats(20.0 * users),
            tpot=_stats(10.0),
            itl_chunk=_stats(10.0),
            itl_e2e=_stats(11.0),
            e2el=_stats(20.0 * users + 150.0),
            tokens_per_chunk=1.0,
            sched_lag=Stats(),
            errors=((error, failed),) if failed else (),
            window_s=1.0 if steady else 0.0,
            window_completed=done,
            input_tokens=32 * done,
            output_tokens=16 * done,
            total_tps=tps + 32 * done,
        )


@dataclass
class ScriptedEngine:
    """Implements `tui.engine.api.Engine` (and its factory's signature); records what the face asked."""

    target: TargetConfig
    workload: WorkloadConfig
    initial: LoadTarget
    workers: int = 1
    requests_log: Path | None = None
    options: EngineOptions | None = None
    probe: bool = True
    fatal_at_level: int | None = None
    """Report a fatal error once this level has had a snapshot."""
    failing_level: int | None = None
    """Every request of this level fails."""
    outage_level: int | None = None
    """This level starts inside an outage (the server answered before, then stopped)..."""
    outage_snapshots: int = 1_000_000
    """...which lasts this many of its snapshots."""
    fatal_on_start: str | None = None
    """The engine cannot start (as when the server check fails): `fatal` from the first moment."""
    loads: list[LoadTarget] = field(default_factory=list)
    started: bool = False
    stop_calls: int = 0
    _levels: list[_Level] = field(default_factory=list)
    _load: LoadTarget | None = None
    _fatal: str | None = None
    _seq: int = 0

    # --- commands ---

    def start(self) -> None:
        self.started = True
        self._fatal = self.fatal_on_start
        self._load = self.initial
        self._levels.append(_Level(1, self.initial, 0.0))

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        return self.started

    def server_view(self) -> None:
        return None  # a scripted engine has no server to scrape

    def set_load(self, target: LoadTarget) -> None:
        self.loads.append(target)
        old, self._load = self.load, target
        current = self._levels[-1]
        if target.paused:
            current.ended_s = current.ended_s or self._elapsed_s()
        elif old.paused or old.value != target.value or old.mode != target.mode:
            level_id = len(self._levels) + 1
            failing = level_id == self.failing_level
            down = self.outage_snapshots if level_id == self.outage_level else 0
            self._levels.append(_Level(level_id, target, self._elapsed_s(), failing=failing, down_steps=down))

    def record_ramp(self, verdict: RampVerdict) -> None:
        """No face ramps a scripted engine: nothing to record."""

    def stop(self, *, finish_in_flight: bool = False, timeout_s: float = 5.0) -> None:
        self.stop_calls += 1

    # --- state ---

    @property
    def load(self) -> LoadTarget:
        assert self._load is not None, "not started"
        return self._load

    @property
    def level_id(self) -> int:
        return self._levels[-1].level_id

    @property
    def model(self) -> str:
        return self.target.model or ""

    @property
    def fatal(self) -> str | None:
        return self._fatal

    @property
    def t0_ns(self) -> int:
        return 0

    @property
    def stopped(self) -> bool:
        return self.stop_calls > 0

    def _elapsed_s(self) -> float:
        return 0.25 * self._seq

    def snapshot(self) -> Snapshot:
        self._seq += 1
        current = self._levels[-1]
        if not self.load.paused and not self.stopped:
            current.steps += 1
            if self.fatal_at_level == current.level_id:
                self._fatal = f"scripted failure at level {current.level_id}"
        views = tuple(lv.view() for lv in self._levels)
        in_flight = 0 if self.load.paused or self.stopped else int(self.load.value)
        return Snapshot(
            seq=self._seq,
            elapsed_s=self._elapsed_s(),
            base_url=self.target.base_url,
            model=self.model,
            endpoint=self.target.endpoint,
            demo=self.target.demo,
            load=self.load,
            level_id=self.level_id,
            in_flight=in_flight,
            completed=sum(v.completed for v in views),
            failed=sum(v.failed for v in views),
            output_tps=views[-1].output_tps,
            request_per_s=views[-1].request_per_s,
            levels=views,
            knee=find_knee(views),
            fatal=self._fatal,
            outages=self._outages(),
        )

    def _outages(self) -> tuple[Outage, ...]:
        """The scripted outage: from a second before its level began to its first snapshot up."""
        level = next((lv for lv in self._levels if lv.down_steps), None)
        if level is None:
            return ()
        end_s = None if level.down else level.started_s + 0.25 * level.down_steps
        return (Outage(max(0.0, level.started_s - 1.0), end_s, "connect"),)

    def detail(self, request_id: int) -> RequestDetail | None:
        return None

    def results(self, *, interrupted: str | None = None) -> Results:
        snap = self.snapshot()
        info = run_info(self.target, self.workload, self.load, options=self.options or EngineOptions(),
                          workers=self.workers, model=self.model, started_at_s=1_700_000_000.0)  # fmt: skip
        views = [(lv, LevelExtras()) for lv in snap.levels]
        return build_results(
            info, snap, views, ClientSummary(0.5, 0.1, saturated=False), interrupted=interrupted
        )

    def write_results(self, path: Path, *, interrupted: str | None = None) -> Path:
        return write_results(self.results(interrupted=interrupted), path)
