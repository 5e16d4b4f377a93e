"""What the app asks of an engine beyond `tui.engine.api.Engine`, each as a protocol it checks at run time:
one that starts in the background (the app waits for it before the first level), one over two endpoints."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from tui.engine.ab.pair import AbView
from tui.engine.api import Engine


@runtime_checkable
class StartsInBackground(Protocol):
    """An engine that checks the server and starts its workers after `start` returns (`EngineHandle`)."""

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        """True once the workers are started or the start failed; ``timeout_s=0`` only looks."""
        ...


@runtime_checkable
class ShowsAb(Protocol):
    """An engine over two endpoints (`tui.engine.ab.pair.AbPair`): B beside A, and the verdicts."""

    b: Engine
    mode: str
    """``parallel`` or ``alternate`` (the pair takes turns)."""

    def ab_view(self) -> AbView:
        """B's snapshot and server, and each level as last judged."""
        ...
