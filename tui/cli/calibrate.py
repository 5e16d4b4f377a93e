"""`tokentop calibrate`: its flags, read into its one `CalibrateConfig`, and its run."""

from __future__ import annotations

import argparse

from tui.argtypes import positive_float, positive_int
from tui.configs import CalibrateConfig


def add_calibrate_args(p: argparse.ArgumentParser) -> None:
    """Every flag of `tokentop calibrate`, each default the config's."""
    p.add_argument(
        "--token-rate",
        type=positive_float,
        default=CalibrateConfig.token_rate,
        metavar="TOK/S",
        help="tokens per second of each stream",
    )
    p.add_argument(
        "--max-streams",
        type=positive_int,
        default=CalibrateConfig.max_streams,
        metavar="N",
        help="the most streams tried",
    )
    p.add_argument(
        "--p99-budget-ms",
        type=positive_float,
        default=CalibrateConfig.p99_budget_ms,
        metavar="MS",
        help="largest client-added p99 ITL error counted as accurate",
    )
    p.add_argument(
        "--step-duration",
        type=positive_float,
        default=CalibrateConfig.step_duration_s,
        metavar="S",
        help="seconds measured per stream count, after a warm-up of about 5 s",
    )
    p.add_argument(
        "--workers", type=positive_int, default=CalibrateConfig.workers, metavar="N", help="engine processes"
    )
    p.add_argument(
        "--lockstep",
        action="store_true",
        help="every stream emits at the same instant, like a batched server's decode step "
        "(default: each stream on its own phase)",
    )


def calibrate_config(ns: argparse.Namespace) -> CalibrateConfig:
    """`tokentop calibrate`'s flags as its one config."""
    return CalibrateConfig(
        token_rate=ns.token_rate,
        p99_budget_ms=ns.p99_budget_ms,
        workers=ns.workers,
        max_streams=ns.max_streams,
        step_duration_s=ns.step_duration,
        lockstep=ns.lockstep,
    )


def run(config: CalibrateConfig) -> int:
    """The calibration (its face imported now, so `tokentop --help` stays light)."""
    from tui.calibrate.command import run as run_calibrate

    return run_calibrate(config)
