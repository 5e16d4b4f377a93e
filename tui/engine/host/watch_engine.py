"""`tokentop watch`: the server's own view with no load at all, for a server that real users are loading.

An `Engine` that starts no workers and sends no request of the load: its snapshots are empty of requests
(so every load pane has nothing to show), its `server_view` is the `/metrics` poller's, and its results
hold what the server reported over the whole watch. Load keys set a target that nothing acts on. With
`--canary-rate`, the canary user's one-token requests are the only load it adds (`host.canary`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from tui import __version__
from tui.engine.aggregate.series import IDLE_SERIES_CAP
from tui.engine.aggregate.store import Store
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig
from tui.engine.host.run_core import (
    LOAD,
    SERVER_VIEW,
    T0_NS,
    RunCore,
    new_store,
    write_results,
)
from tui.engine.redact import display_url
from tui.engine.results.watch_model import WatchResults, WatchTarget
from tui.engine.server_metrics.parts import with_client
from tui.engine.server_metrics.view import ServerView
from tui.engine.snapshot import RampVerdict, RequestDetail, Snapshot


class WatchEngine:
    """Implements `tui.engine.api.Engine` by watching only: one poller thread, no workers, no requests."""

    def __init__(self, target: TargetConfig, options: EngineOptions | None = None) -> None:
        self.target = target
        self.options = options or EngineOptions()
        store = self._new_store()
        self.core = RunCore(target, self.options, store, LoadTarget(concurrency=0, paused=True), workers=0)
        self.stopped = False
        self._snapshot_lock = threading.Lock()
        """Snapshots are taken by the app and by tokentop's own ``/metrics`` thread."""

    def _new_store(self) -> Store:
        return new_store(self.options, time.perf_counter_ns(), 0, series_cap=IDLE_SERIES_CAP)

    def start(self) -> None:
        """Start scraping (the first scrape is immediate)."""
        if self.core.scrape.started:
            return
        self.core.started_at = time.time()
        self.core.store = self._new_store()
        self.core.scrape.start(self.target, self.options, on_notice=self.core.store.add_notice)

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        """Ready at once: there are no workers to wait for."""
        return True

    def set_load(self, target: LoadTarget) -> None:
        """Kept, never acted on: watching sends no load."""
        self.core.load = target

    def record_ramp(self, verdict: RampVerdict) -> None:
        """Watching runs no ramp: nothing to record."""

    @property
    def level_id(self) -> int:
        return 0

    load, t0_ns, server_view = LOAD, T0_NS, SERVER_VIEW

    def write_results(self, path: Path, *, interrupted: str | None = None) -> Path:
        return write_results(self.results(interrupted=interrupted), path)

    @property
    def model(self) -> str:
        view = self.server_view()
        return (view.model if view is not None else None) or self.target.model or ""

    @property
    def fatal(self) -> str | None:
        return None

    def snapshot(self) -> Snapshot:
        """No requests, no levels: the header fields and the poller's notices."""
        with self._snapshot_lock:
            self.core.model = self.model
            return self.core.snapshot(time.perf_counter_ns(), None)

    def detail(self, request_id: int) -> RequestDetail | None:
        return None

    def results(self, *, interrupted: str | None = None) -> WatchResults:
        """What the server reported over the whole watch (the same figures a load level's `server` has).
        A watch has no end of its own: ``interrupted`` (how it was stopped) is only recorded."""
        now = time.perf_counter_ns()
        view = self.server_view()
        return WatchResults(
            version=__version__,
            started_at=self.core.started_at,
            duration=(now - self.t0_ns) / 1e9,
            target=WatchTarget(url=display_url(self.target.base_url), model=self.model or None),
            server=self._server_summary(view, now) if view is not None else None,
            notices=tuple(self.core.store.notices),
            stopped_by=interrupted,
        )

    def _server_summary(self, view: ServerView, now_ns: int) -> dict[str, Any]:
        """The server's figures over the whole watch, saying what load tokentop added (none, or the canary).
        Its TTFT parts are the server's only: the users it serves are not ours to time, and the canary's few
        requests are not the population its histograms count."""
        summary = self.core.scrape.summary(view, self.t0_ns, now_ns)
        summary["ttft_parts"] = with_client(summary.get("ttft_parts"), None)
        summary["load_sent"] = "a canary user only" if summary.get("canary") is not None else "none"
        return summary

    def stop(self, *, finish_in_flight: bool = False, timeout_s: float = 5.0) -> None:
        """Stop scraping and close the log. Idempotent."""
        self.core.scrape.stop()
        self.stopped = True
