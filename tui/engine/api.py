"""The small surface every face uses to drive an engine: commands in, snapshots out.

The live app, the headless bench and the tests all talk to an `Engine`; the real one
(`tui.engine.handle.EngineHandle`) hosts the load generator in worker processes, a fake one in
tests hands out frozen snapshots. Everything crossing this surface is plain data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from tui.engine.config import LoadTarget
from tui.engine.snapshot import RequestDetail, Snapshot


class Engine(Protocol):
    """Commands in, snapshots out. Methods are cheap and never block on the network."""

    def start(self) -> None:
        """Start the worker processes and begin issuing load at the current target."""

    def set_load(self, target: LoadTarget) -> None:
        """Set the target load; the engine reconciles (new users start at once, surplus users finish
        their in-flight request and stop). A change of mode or value starts a new load level."""

    @property
    def load(self) -> LoadTarget:
        """The current target."""

    def snapshot(self) -> Snapshot:
        """The state now: drains what the workers sent since the last call and summarises it."""

    def detail(self, request_id: int) -> RequestDetail | None:
        """A recent request's full record (chunk timeline, error), or None if it is no longer kept."""

    def write_results(self, path: Path) -> Path:
        """Write results JSON (vLLM-compatible per-level keys) for what was measured so far."""

    def stop(self, *, drain: bool = False, timeout_s: float = 5.0) -> None:
        """Stop issuing; cancel (or, with drain, let finish) in-flight requests; join the workers.
        Idempotent. Nothing already measured is lost: the requests log is flushed."""
