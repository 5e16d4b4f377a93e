"""One literal per default: every flag's argparse default is its config field's (read from the dataclass
where the flag is declared), and `--help` shows every default a flag has (#35)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from tui.cli import build_parser
from tui.cli.ray_check import RayCheckConfig
from tui.configs import (
    AbConfig,
    BenchConfig,
    CalibrateConfig,
    CompareConfig,
    LiveConfig,
    OwnMetrics,
    ReplayConfig,
)
from tui.demo import DemoConfig
from tui.engine.config import (
    EngineOptions,
    LoadTarget,
    RayPlacement,
    TargetConfig,
    TraceConfig,
    WorkloadConfig,
)
from tui.sim.config import SimConfig
from tui.sim.flags import DEFAULT_PROFILE

FIELDS: dict[tuple[str, str], Any] = {
    # (command, dest) -> the config field's default the flag must carry
    **{(c, "api"): TargetConfig.endpoint for c in ("live", "bench")},
    **{(c, "timeout"): TargetConfig.timeout_s for c in ("live", "bench")},
    **{(c, "sim_profile"): DemoConfig.profile for c in ("live", "bench")},
    **{(c, "isl"): WorkloadConfig.isl for c in ("live", "bench")},
    **{(c, "osl"): WorkloadConfig.osl for c in ("live", "bench")},
    **{(c, "seed"): WorkloadConfig.seed for c in ("live", "bench")},
    **{(c, "shared_prefix"): WorkloadConfig.shared_prefix for c in ("live", "bench")},
    **{(c, "turns"): WorkloadConfig.turns for c in ("live", "bench")},
    **{(c, "trace_start"): TraceConfig.start_s for c in ("live", "bench")},
    **{(c, "trace_block_size"): TraceConfig.block_size for c in ("live", "bench")},
    ("live", "workers"): LiveConfig.workers,
    ("bench", "workers"): BenchConfig.workers,
    **{(c, "user_stagger_ms"): EngineOptions.user_stagger_s * 1e3 for c in ("live", "bench")},
    **{(c, "label"): EngineOptions.record_label for c in ("live", "bench")},
    **{(c, "slo_target"): EngineOptions.slo_target for c in ("live", "bench")},
    ("bench", "on_node_loss"): RayPlacement.on_node_loss,
    ("bench", "arrival"): LoadTarget.arrival,
    **{(c, "ab_mode"): AbConfig.mode for c in ("live", "bench")},
    **{(c, "ab_threshold"): AbConfig.threshold_pct for c in ("live", "bench")},
    **{(c, "ab_block"): AbConfig.block_s for c in ("live", "bench")},
    ("bench", "sim_time_scale"): DemoConfig.time_scale,
    ("bench", "repeat"): BenchConfig.repeat,
    ("calibrate", "token_rate"): CalibrateConfig.token_rate,
    ("calibrate", "max_streams"): CalibrateConfig.max_streams,
    ("calibrate", "p99_budget_ms"): CalibrateConfig.p99_budget_ms,
    ("calibrate", "step_duration"): CalibrateConfig.step_duration_s,
    ("calibrate", "workers"): CalibrateConfig.workers,
    ("watch", "interval"): EngineOptions.metrics_interval_s,
    **{(c, "serve_metrics_host"): OwnMetrics.host for c in ("live", "bench", "watch")},
    ("replay", "speed"): ReplayConfig.speed,
    ("compare", "threshold"): CompareConfig.threshold_pct,
    ("ray-check", "ray"): RayCheckConfig.address,
    ("sim", "host"): SimConfig.host,
    ("sim", "port"): SimConfig.port,
    ("sim", "time_scale"): SimConfig.time_scale,
    ("sim", "seed"): SimConfig.seed,
    ("sim", "tokens_per_chunk"): SimConfig.tokens_per_chunk,
    ("sim", "reasoning_tokens"): SimConfig.reasoning_tokens,
    ("sim", "keep_alive"): SimConfig.keep_alive_s,
}
"""A flag with a value for a default, by the config field it fills."""
OWN_DEFAULTS = {
    ("live", "on_node_loss"): "continue",  # the live app carries on over the workers left; bench stops
    ("sim", "profile"): DEFAULT_PROFILE,  # the simulator's own profile name (SimConfig holds the Profile)
}
"""Deliberate defaults that are no config field's, each with its reason."""


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {"": parser, **sub.choices}


def _valued(action: argparse.Action) -> bool:
    """An action whose default is a value to compare (not a switch, an empty list, or none)."""
    default = action.default
    no_value = default is None or default == argparse.SUPPRESS or isinstance(default, bool)
    return bool(action.option_strings) and not no_value and not (isinstance(default, list) and not default)


def test_every_flags_default_is_its_config_fields() -> None:
    expected = {**FIELDS, **OWN_DEFAULTS}
    seen = set()
    for name, parser in _commands().items():
        command = name or "live"
        for action in parser._actions:
            if not _valued(action):
                continue
            key = (command, action.dest)
            assert key in expected, (
                f"{command} {action.option_strings[0]}: map its default to its config field"
            )
            assert action.default == expected[key], f"{command} {action.option_strings[0]}"
            seen.add(key)
    assert seen == set(expected), f"mapped but not found: {set(expected) - seen}"


@pytest.mark.parametrize("command", sorted(_commands()))
def test_help_shows_every_default(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # no line wrapped inside a value (argparse breaks at hyphens)
    parser = _commands()[command]
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if not _valued(action):
            continue
        default = action.default
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        flag = action.option_strings[0]
        assert f"default {shown}" in text, f"{command or 'tokentop'} {flag}: --help does not show {shown}"
    if command in ("", "live", "bench"):  # the ones a new user asked about
        assert f"--isl N input tokens per request (default {WorkloadConfig.isl})" in text
        assert f"--osl N output tokens per request (default {WorkloadConfig.osl})" in text
