"""`tokentop` / `tokentop live`: the live app's flags, read into its one `LiveConfig`, and its run."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.argtypes import positive_float, positive_int
from tui.cli.ab import ab_from_args, add_ab_args
from tui.cli.cluster import add_ray_args
from tui.cli.load import add_engine_args, engine_options_from_args
from tui.cli.metrics import add_metrics_args
from tui.cli.record import (
    add_baseline_arg,
    add_record_args,
    add_schedule_arg,
    baseline_from_args,
    schedule_from_args,
)
from tui.cli.target import add_target_args, run_target_from_args
from tui.cli.telemetry import add_telemetry_args, own_metrics_from_args
from tui.cli.workload import add_workload_args, workload_from_args
from tui.configs import LiveConfig, UsageError
from tui.engine.config import LoadTarget

DEMO_CONCURRENCY = 4
"""The demo starts at 4 users so every pane has something to show at once; a real target starts at 1."""


def add_live_args(p: argparse.ArgumentParser) -> None:
    """Every flag of the live app (on `tokentop` itself and on `tokentop live`)."""
    add_target_args(p)
    add_metrics_args(p)
    add_workload_args(p)
    add_engine_args(
        p, slo="{} objective: SLO attainment and goodput per level; the auto ramp (a) finds capacity at it"
    )
    load = p.add_mutually_exclusive_group()
    load.add_argument(
        "--concurrency",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"start closed-loop with N users (default {LoadTarget.concurrency}; {DEMO_CONCURRENCY} in the "
        "demo)",
    )
    load.add_argument(
        "--rate", type=positive_float, default=None, metavar="R", help="start open-loop at R requests/s"
    )
    p.add_argument(
        "--theme",
        default=None,
        metavar="NAME|PATH",
        help="theme name (dark, light, high-contrast, or any file in the themes folder) "
        "or the path of a theme file",
    )
    p.add_argument("--output", "-o", metavar="results.json", help="write results here on quit")
    p.add_argument(
        "--requests-log", metavar="requests.jsonl", help="append one JSON line per finished request"
    )
    add_record_args(p)
    add_telemetry_args(p)
    add_schedule_arg(p)
    add_baseline_arg(p)
    add_ray_args(p, on_node_loss="continue")
    add_ab_args(p)


def live_config(ns: argparse.Namespace) -> LiveConfig:
    """The live app's flags as its one config; a flag that cannot be used is a `UsageError`."""
    server = run_target_from_args(ns)
    schedule = schedule_from_args(ns, levels=bool(ns.concurrency or ns.rate))
    changes: tuple[tuple[float, LoadTarget], ...] = ()
    if schedule is None:
        load = initial_load(ns, demo=server.demo is not None)
    else:
        load, changes = schedule.changes[0].target, tuple((c.at_s, c.target) for c in schedule.changes[1:])
    ab = ab_from_args(ns, server.target)
    if ab is not None and ns.baseline is not None:
        raise UsageError("--ab draws B where --baseline would draw its run: give one of them")
    return LiveConfig(
        server=server,
        workload=workload_from_args(ns),
        load=load,
        options=engine_options_from_args(ns),
        workers=ns.workers,
        theme=ns.theme,
        output=Path(ns.output) if ns.output else None,
        requests_log=Path(ns.requests_log) if ns.requests_log else None,
        schedule=changes,
        baseline=baseline_from_args(ns),
        own_metrics=own_metrics_from_args(ns),
        ab=ab,
    )


def initial_load(ns: argparse.Namespace, *, demo: bool) -> LoadTarget:
    """The live app's first target: a trace at ``--trace-speed``, ``--rate`` or ``--concurrency``, else 1 user
    (4 in the demo)."""
    if ns.trace is not None:
        speeds = ns.trace_speed or [LoadTarget.speed]
        if len(speeds) > 1:
            raise UsageError(
                "the live app starts at one --trace-speed (the keys change it; bench sweeps a list)"
            )
        return LoadTarget(mode="trace", speed=float(speeds[0]))
    if ns.rate is not None:
        return LoadTarget(mode="rate", rate=ns.rate)
    if ns.concurrency is not None:
        return LoadTarget(mode="concurrency", concurrency=ns.concurrency)
    return LoadTarget(mode="concurrency", concurrency=DEMO_CONCURRENCY if demo else LoadTarget.concurrency)


def run(config: LiveConfig) -> int:
    """The live app (imported now: `tokentop --help` must not load Textual)."""
    from tui.app.run import run as run_live

    return run_live(config)
