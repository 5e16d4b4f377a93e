"""`tokentop sim` flags validated into one frozen `SimConfig`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from tui.sim.faults import FaultConfig, parse_fault_specs
from tui.sim.perf_model import Profile, get_profile


@dataclass(frozen=True)
class SimConfig:
    """Everything the simulator needs; built from `tokentop sim` flags by `config_from_args`."""

    profile: Profile
    host: str = "127.0.0.1"
    port: int = 8000
    time_scale: float = 1.0
    """All modelled durations are divided by this (>1 runs faster, for tests)."""
    seed: int = 0
    tokens_per_chunk: int = 1
    reasoning_tokens: int = 0
    faults: FaultConfig = field(default_factory=FaultConfig)
    truth_log: Path | None = None
    state_log: Path | None = None
    """Where to write the scheduler's state changes (`tui.sim.truth.StateLog`); None: nowhere."""
    metrics: bool = True
    """Serve `GET /metrics`; False answers 404, like a server started without its metrics switch."""
    exit_with_parent: bool = False
    """Stop at end of file on standard input (`SimServer` holds the other end: the child dies with it)."""
    keep_alive_s: float = 5.0
    """Close a connection idle this long (uvicorn's default, as under vLLM and SGLang); 0: never."""
    prefix_cache: bool = True
    """Serve prompts' leading blocks from a prefix cache and report ``cached_tokens``, as vLLM does by
    default (`tui.sim.prefix_cache`)."""
    cache_reset: bool = True
    """Serve ``POST /reset_prefix_cache`` (vLLM's, with ``VLLM_SERVER_DEV_MODE=1``); False answers 404."""


def config_from_args(ns: argparse.Namespace) -> SimConfig:
    """Validate `tokentop sim` flags (every one `tui.sim.flags` declares) into a SimConfig; ValueError with
    a one-line reason."""
    profile = get_profile(ns.profile)
    max_seqs, kv_tokens, prefill_chunk = ns.max_seqs, ns.kv_tokens, ns.prefill_chunk
    if max_seqs is not None or kv_tokens is not None or prefill_chunk is not None:
        profile = profile.with_overrides(
            max_num_seqs=max_seqs, kv_cache_tokens=kv_tokens, prefill_chunk_tokens=prefill_chunk
        )
    if ns.reasoning_tokens < 0:
        raise ValueError(f"--reasoning-tokens must be 0 or more, got {ns.reasoning_tokens}")
    if not 0 <= ns.port <= 65535:
        raise ValueError(f"--port must be 0..65535, got {ns.port}")
    keep_alive_s: float = ns.keep_alive
    if not 0 <= keep_alive_s < float("inf"):  # also refuses NaN
        raise ValueError(f"--keep-alive must be 0 (never close) or more seconds, got {keep_alive_s:g}")
    return SimConfig(
        profile=profile,
        host=ns.host,
        port=ns.port,
        time_scale=ns.time_scale,
        seed=ns.seed,
        tokens_per_chunk=ns.tokens_per_chunk,
        reasoning_tokens=ns.reasoning_tokens,
        faults=parse_fault_specs(ns.fault),
        truth_log=Path(ns.truth_log) if ns.truth_log else None,
        state_log=Path(ns.state_log) if ns.state_log else None,
        metrics=ns.metrics,
        exit_with_parent=ns.exit_with_parent,
        keep_alive_s=keep_alive_s,
        prefix_cache=ns.prefix_cache,
        cache_reset=ns.cache_reset,
    )
