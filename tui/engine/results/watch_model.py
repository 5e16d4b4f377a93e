"""The results of a passive `tokentop watch`: what the server reported over the whole watch, with no load and
no levels (a load run's document is `tui.engine.results.model.Results`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tui.engine.results.codec import key


@dataclass(frozen=True, kw_only=True)
class WatchTarget:
    url: str
    model: str | None = None


@dataclass(frozen=True, kw_only=True)
class WatchResults:
    """A passive watch: what the server reported over the whole watch (no load, no levels)."""

    tool: str = "tokentop"
    version: str
    mode: Literal["watch"] = "watch"
    started_at: float | None = None
    """Wall-clock start (``time.time()``)."""
    duration: float
    target: WatchTarget
    server: dict[str, Any] | None = None
    notices: tuple[str, ...] = ()
    stopped_by: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))
