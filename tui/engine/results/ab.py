"""The results' ``ab`` section's parts: each level's figures on both sides and their verdict.

B's own run is a whole `Results` inside the section (`tui.engine.results.model.Ab`), so every export
and plot takes it as it takes A's document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tui.engine.results.codec import key


@dataclass(frozen=True, kw_only=True)
class AbDifference:
    """One figure of a level on both sides (`tui.engine.sessions.compare.Difference`)."""

    metric: str
    a: float | None
    b: float | None
    change_pct: float | None
    """B against A, in percent (+10: B's figure is 10 % higher)."""
    verdict: str
    """better, worse (B against A), within noise, or unjudged (``reason`` says why)."""
    ci95_pct: tuple[float, float] | None = field(default=None, metadata=key(omit_none=True))
    """The change's 95 % interval in percent, where it was judged."""
    reason: str = field(default="", metadata=key(when=lambda d: bool(d.reason)))


@dataclass(frozen=True, kw_only=True)
class AbLevel:
    """A level as both sides ran it: A's and B's level ids and each figure's difference."""

    mode: str
    value: float
    """Users, or requests per second."""
    a_level_id: int
    b_level_id: int
    errors: tuple[int, int] = (0, 0)
    """Failed requests on A and on B."""
    differences: tuple[AbDifference, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))

    def verdict(self, metric: str) -> str | None:
        """The verdict on ``metric`` at this level, or None if it was not compared."""
        return next((d.verdict for d in self.differences if d.metric == metric), None)
