"""The results' price at the capacity at SLO (`Results.cost_at_slo`); apart from `model` to keep it short."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tui.engine.results.codec import key


@dataclass(frozen=True, kw_only=True)
class CostAtSlo:
    """With ``--cost-per-hour`` and an SLO: the price at the capacity at SLO, the highest load whose
    attainment's 95 % lower bound met ``slo_target`` (`tui.engine.aggregate.attainment.capacity_level`)."""

    level_id: int | None
    """None: no level met it."""
    value: float | None = None
    """Its load: users, requests/s or a trace's speed-up."""
    usd_per_mtok_goodput: float | None = None
    """That level's ``slo.usd_per_mtok_goodput``: $ per million output tokens that met the SLO."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))
