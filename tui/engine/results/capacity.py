"""The results' capacity at SLO (`Results.capacity_at_slo`); apart from `model` to keep it short."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tui.engine.results.codec import key


@dataclass(frozen=True, kw_only=True)
class CapacityAtSlo:
    """With an SLO: the highest load whose attainment's 95 % lower bound met ``slo_target``, over every level
    (`tui.engine.aggregate.attainment.capacity_level`: the rule of bench's "capacity at SLO" line and the
    ramp's), saved for every run so `tokentop compare` can set two runs' side by side."""

    level_id: int | None
    """None: no level met it."""
    mode: str | None = field(default=None, metadata=key(omit_none=True))
    """That level's load mode (``concurrency``, ``rate`` or ``trace``)."""
    value: float | None = field(default=None, metadata=key(omit_none=True))
    """Its load: users, requests/s or a trace's speed-up."""
    output_goodput: float | None = field(default=None, metadata=key(omit_none=True))
    """Output tokens/s of its requests that met the SLO (its ``slo.output_goodput``)."""
    request_goodput: float | None = field(default=None, metadata=key(omit_none=True))
    """Requests/s of those (its ``slo.request_goodput``)."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))
