"""A level's server figures as the results model types them (`Level.server`): apart from `model` because
they follow the server's signals (`tui.engine.server_metrics.kinds`), one field per key in the order
`ServerView.level_summary` writes them; a key it gains before this does is kept in ``extra``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from tui.engine.results.codec import key


@dataclass(frozen=True, kw_only=True)
class LevelServer:
    """The server's /metrics over one level's window: time-averaged gauges (``*_mean``), rates, latency
    histograms in ms, the TTFT parts, the GPUs, restarts, and the canary's figures when one ran."""

    kind: str | None = None
    model: str | None = None
    status: str | None = None
    found: tuple[str, ...] = ()
    scrapes: int = 0
    running_mean: float | None = None
    waiting_mean: float | None = None
    kv_usage_mean: float | None = None
    preemptions_per_s: float | None = None
    prefix_cache_hit_rate: float | None = None
    generation_tok_s: float | None = None
    prompt_tok_s: float | None = None
    spec_acceptance: float | None = None
    preemptions: float | None = None
    """Requests the server preempted over the window (its counter's increase)."""
    ttft_ms: dict[str, Any] | None = None
    itl_ms: dict[str, Any] | None = None
    queue_ms: dict[str, Any] | None = None
    e2e_ms: dict[str, Any] | None = None
    prefill_ms: dict[str, Any] | None = None
    decode_ms: dict[str, Any] | None = None
    inference_ms: dict[str, Any] | None = None
    ttft_parts: dict[str, Any] | None = None
    gpu: dict[str, Any] | None = None
    restarts: int = 0
    late_scrapes: int = field(default=0, metadata=key(when=lambda s: s.late_scrapes > 0))
    """Scrapes in the window that were late (`ServerView.late_at_ns`); written when any."""
    canary: dict[str, Any] | None = field(default=None, metadata=key(when=lambda s: s.has_canary))
    """The canary's figures over the window; written when a canary ran."""
    has_canary: bool = field(default=False, metadata=key(presence="canary"))
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))


def level_server(figures: Mapping[str, Any] | None) -> LevelServer | None:
    """`ServerView.level_summary`'s plain figures (with the client's TTFT part) as a `LevelServer`: its values
    as they are (no check: they are the engine's own), keys this does not know in ``extra``."""
    if figures is None:
        return None
    names = {f.name for f in fields(LevelServer)} - {"has_canary", "extra"}
    known = {k: v for k, v in figures.items() if k in names}
    if "found" in known:
        known["found"] = tuple(known["found"])
    extra = {k: v for k, v in figures.items() if k not in names}
    return LevelServer(**known, has_canary="canary" in figures, extra=extra)
