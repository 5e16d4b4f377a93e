"""The results' place in a ``bench --repeat N`` set (`Results.repeat`): apart from `model` (its length)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tui.engine.results.codec import key


@dataclass(frozen=True, kw_only=True)
class RepeatSet:
    """Run ``run`` of ``runs`` of one ``bench --repeat`` set: `tokentop compare`, given one of its results
    files, finds the others beside it by their numbered names and takes those carrying ``set_id``."""

    set_id: str
    """Alike in every run of the set (and in their sessions' headers), different for every set."""
    run: int
    runs: int
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))
