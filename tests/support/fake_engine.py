"""An `Engine` that serves frozen snapshots and records what the app asked of it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.support import frozen
from tui.engine.config import LoadTarget
from tui.engine.results.files import write_results
from tui.engine.server_metrics.view import ServerView
from tui.engine.snapshot import RampVerdict, RequestDetail, Snapshot


class FakeEngine:
    """Deterministic: `snapshot()` returns the frozen data with the current target; nothing runs."""

    def __init__(self, snap: Snapshot | None = None) -> None:
        self.snap = snap or frozen.snapshot()
        self._load = self.snap.load
        self.loads: list[LoadTarget] = []
        self.started = False
        self.stopped = 0
        self.snapshots = 0
        self.results: list[Path] = []
        self.ramps: list[RampVerdict] = []
        """What the app recorded of each ramp that stopped by itself."""
        self.ready = True
        """What `wait_ready` answers: False plays an engine still probing the server."""
        self.server: ServerView | None = None
        """What `server_view` answers (None: the engine does not scrape)."""

    def start(self) -> None:
        self.started = True

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        return self.ready

    def server_view(self) -> ServerView | None:
        return self.server

    def set_load(self, target: LoadTarget) -> None:
        self.loads.append(target)
        self._load = target

    def record_ramp(self, verdict: RampVerdict) -> None:
        self.ramps.append(verdict)

    @property
    def load(self) -> LoadTarget:
        return self._load

    @property
    def t0_ns(self) -> int:
        return 0  # the frozen run starts at the clock's zero (the app's clock is frozen at 0 too)

    def snapshot(self) -> Snapshot:
        self.snapshots += 1
        return replace(self.snap, load=self._load)

    def detail(self, request_id: int) -> RequestDetail | None:
        return frozen.detail(request_id)

    def write_results(self, path: Path, *, interrupted: str | None = None) -> Path:
        """The real results document of the frozen snapshot, as the real writer writes it."""
        from tests.unit.results_data import frozen_results

        write_results(frozen_results(snap=self.snap, interrupted=interrupted), path)
        self.results.append(path)
        return path

    def stop(self, *, finish_in_flight: bool = False, timeout_s: float = 5.0) -> None:
        self.stopped += 1
