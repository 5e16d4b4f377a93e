"""The engine group of the commands that send load (live, bench): how many worker processes, how fast new
users start, the SLOs; and `engine_options_from_args`, which gathers these with the server-metrics, Ray and
record groups into the one `EngineOptions` the engine takes."""

from __future__ import annotations

import argparse
from dataclasses import replace

from tui.argtypes import non_negative_float, positive_float, positive_int, share
from tui.cli.cluster import placement_from_args
from tui.cli.metrics import metrics_from_args
from tui.cli.record import record_from_args
from tui.cli.telemetry import otlp_from_args
from tui.configs import LiveConfig
from tui.engine.config import EngineOptions


def add_engine_args(p: argparse.ArgumentParser, *, slo: str) -> None:
    """``--workers``, ``--user-stagger-ms``, the SLO flags; ``slo`` is the objectives' help with ``{}`` for
    the figure (what the command does with them)."""
    p.add_argument(
        "--workers",
        type=positive_int,
        default=LiveConfig.workers,  # BenchConfig's is the same
        metavar="N",
        help="engine processes sharing the load (more streams than one core can time)",
    )
    p.add_argument(
        "--user-stagger-ms",
        type=non_negative_float,
        default=EngineOptions.user_stagger_s * 1e3,
        metavar="MS",
        help="closed loop: new users start this far apart, a whole step within 1 s (0: all at once)",
    )
    p.add_argument("--slo-ttft-ms", type=positive_float, metavar="MS", help=slo.format("TTFT"))
    p.add_argument("--slo-tpot-ms", type=positive_float, metavar="MS", help=slo.format("TPOT"))
    p.add_argument("--slo-e2e-ms", type=positive_float, metavar="MS", help=slo.format("E2E latency"))
    p.add_argument(
        "--slo-target",
        type=share,
        default=EngineOptions.slo_target,
        metavar="SHARE",
        help="capacity at SLO: the highest load whose attainment's 95 %% lower bound reaches this",
    )
    p.add_argument(
        "--cost-per-hour",
        type=positive_float,
        metavar="USD",
        help="what the server costs per hour (GPUs, instance): $ per million tokens per level",
    )


def engine_options_from_args(ns: argparse.Namespace) -> EngineOptions:
    """The engine tunables the flags set: the SLOs, the user stagger, the ISL probe, server metrics, the
    Ray placement, the recording and the OTLP spans, each group checked by its own reader."""
    metrics = metrics_from_args(ns)
    options = EngineOptions(
        slo_ttft_ms=ns.slo_ttft_ms,
        slo_tpot_ms=ns.slo_tpot_ms,
        slo_e2e_ms=ns.slo_e2e_ms,
        slo_target=ns.slo_target,
        cost_per_hour=ns.cost_per_hour,
        user_stagger_s=ns.user_stagger_ms / 1e3,
        isl_probe=ns.isl_probe,
        reset_cache=ns.reset_cache,
        placement=placement_from_args(ns),
        on_worker_loss=ns.on_node_loss,
        **metrics,
    )
    return replace(options, **record_from_args(ns), **otlp_from_args(ns))
