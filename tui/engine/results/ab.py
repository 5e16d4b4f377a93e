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


@dataclass(frozen=True, kw_only=True)
class AbServed:
    """The highest load a side serves at the SLO, and its requests there (a side's turns pooled)."""

    mode: str
    value: float
    """Users, requests per second or a trace's speed-up."""
    met: int
    requests: int


@dataclass(frozen=True, kw_only=True)
class AbCapacity:
    """With an SLO: each side's capacity at it (`tui.engine.sessions.ab.ab_capacity`); None: no load."""

    target: float
    """The share of requests that must meet the SLO (``slo_target``), by its 95 % lower bound."""
    a: AbServed | None
    b: AbServed | None

    def line(self) -> str:
        """ "B serves 24 users at the SLO, A 16 users (95 % of requests by the lower bound)"."""
        b, a = (_served(c) for c in (self.b, self.a))
        return f"B serves {b} at the SLO, A {a} ({self.target * 100:g} % of requests by the lower bound)"


def _served(served: AbServed | None) -> str:
    """A load as words: "16 users", "2.5 req/s", "trace x2", or "no load"."""
    if served is None:
        return "no load"
    value, mode = served.value, served.mode
    if mode == "concurrency":
        return f"{value:g} user" + ("" if value == 1 else "s")
    return f"trace x{value:g}" if mode == "trace" else f"{value:g} req/s"
