"""The small surface every face uses to drive an engine: commands in, snapshots out.

The live app, the headless bench, calibrate and the tests all talk to an `Engine`; the real one
(`tui.engine.host.handle.EngineHandle`) hosts the load generator in worker processes, a fake one in
tests hands out frozen snapshots. Everything crossing this surface is plain data. A face that creates its
own engine takes an `EngineFactory` (default: `EngineHandle` itself), so it can run against a fake too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.snapshot import RampVerdict, RequestDetail, Snapshot

if TYPE_CHECKING:
    from tui.engine.results.model import Document
    from tui.engine.server_metrics.view import ServerView


class Engine(Protocol):
    """Commands in, snapshots out. Methods are cheap and never block on the network (`wait_ready` and
    `stop` block on the engine's own start and end, bounded by their timeouts)."""

    def start(self) -> None:
        """Start the worker processes and begin issuing load at the current target."""

    def server_view(self) -> ServerView | None:
        """The server's own signals from its ``/metrics`` as last scraped, or None when not scraped."""

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        """Block until the engine is issuing load or its start failed (see `fatal`); False on timeout."""

    def set_load(self, target: LoadTarget) -> None:
        """Set the target load; the engine reconciles (new users start at once, surplus users finish
        their in-flight request and stop). A change of mode or value starts a new load level."""

    def record_ramp(self, verdict: RampVerdict) -> None:
        """What the auto ramp said when it stopped: the results keep it (``ramp``), and it joins the
        notices."""

    @property
    def load(self) -> LoadTarget:
        """The current target."""

    @property
    def level_id(self) -> int:
        """The current load level's id (a new one for each change of target or resume)."""

    @property
    def model(self) -> str:
        """The model in use ("" until resolved)."""

    @property
    def fatal(self) -> str | None:
        """Why the engine cannot go on (one line), or None."""

    @property
    def t0_ns(self) -> int:
        """The run's zero (``perf_counter_ns``); snapshot times in seconds are relative to it."""

    @property
    def stopped(self) -> bool:
        """True once `stop` has finished."""

    def snapshot(self) -> Snapshot:
        """The state now: reads what the workers sent since the last call and summarises it."""

    def detail(self, request_id: int) -> RequestDetail | None:
        """A recent request's full record (chunk timeline, error), or None if it is no longer kept."""

    def results(self, *, interrupted: str | None = None) -> Document:
        """The results document (`tui.engine.results.model`) for what was measured so far.
        ``interrupted``: why the run was cut short ("quit", "SIGINT", ...), None when it finished; the
        document says so (``interrupted``, ``interrupted_by``)."""

    def write_results(self, path: Path, *, interrupted: str | None = None) -> Path:
        """Write results JSON (vLLM-compatible per-level keys) for what was measured so far
        (``interrupted`` as in `results`)."""

    def stop(self, *, finish_in_flight: bool = False, timeout_s: float = 5.0) -> None:
        """Stop issuing; cancel (or, with ``finish_in_flight``, let finish) in-flight requests; join the
        workers. Idempotent. Nothing already measured is lost: the requests log is flushed."""


class EngineFactory(Protocol):
    """What a face calls to make its engine: `EngineHandle`'s constructor, or a test's fake."""

    def __call__(
        self,
        target: TargetConfig,
        workload: WorkloadConfig,
        load: LoadTarget,
        *,
        workers: int = 1,
        requests_log: Path | None = None,
        options: EngineOptions | None = None,
        probe: bool = True,
    ) -> Engine:
        """An engine for ``target`` at ``load``, not started yet. ``probe=False``: the face has checked
        the server and put the model in ``target``."""
