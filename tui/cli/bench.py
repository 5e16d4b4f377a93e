"""`tokentop bench`: the headless sweep's flags (its levels and how each ends, its output files), read
into its one `BenchConfig`, and its run."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.argtypes import level_list, positive_float, positive_int
from tui.cli.ab import ab_from_args, add_ab_args
from tui.cli.cluster import add_ray_args
from tui.cli.load import add_engine_args, engine_options_from_args
from tui.cli.metrics import add_metrics_args
from tui.cli.record import add_record_args, add_schedule_arg, schedule_from_args
from tui.cli.target import add_target_args, run_target_from_args
from tui.cli.telemetry import add_telemetry_args, own_metrics_from_args
from tui.cli.workload import add_workload_args, workload_from_args
from tui.configs import BenchConfig, UsageError
from tui.demo import DemoConfig
from tui.engine.config import LoadTarget


def add_bench_args(p: argparse.ArgumentParser) -> None:
    """Every flag of `tokentop bench`."""
    add_target_args(p)
    add_metrics_args(p)
    add_workload_args(p)
    add_engine_args(p, slo="{} objective: SLO attainment and goodput per level")
    load = p.add_mutually_exclusive_group()
    load.add_argument(
        "--concurrency",
        type=level_list(int),
        metavar="N,N,...",
        help=f"closed-loop levels, e.g. 1,2,4,8 (default {LoadTarget.concurrency})",
    )
    load.add_argument("--rate", type=level_list(float), metavar="R,R,...", help="open-loop levels in req/s")
    p.add_argument(
        "--arrival",
        choices=["poisson", "constant"],
        default=LoadTarget.arrival,
        help="open loop: how arrivals are spaced",
    )
    p.add_argument("--max-concurrency", type=positive_int, metavar="N", help="open loop: cap on in-flight")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument(
        "--requests",
        type=positive_int,
        metavar="N",
        help="finished requests per level, counted in its steady window "
        "(default max(20, 4 x users); at a rate, 5 s of arrivals)",
    )
    stop.add_argument("--duration", type=positive_float, metavar="S", help="seconds per level")
    p.add_argument("--output", "-o", metavar="results.json", help="write results JSON here")
    p.add_argument("--requests-log", metavar="requests.jsonl", help="one JSON line per request as it ends")
    p.add_argument(
        "--vllm-results",
        metavar="DIR",
        help="also write one JSON file per level here, in vllm bench serve --save-result's shape",
    )
    p.add_argument("--csv", metavar="PATH", help="also write the level table here as CSV (one row per level)")
    p.add_argument(
        "--plot",
        metavar="PATH.svg",
        help="also write an SVG plot here: output tok/s vs the load, the knee, TTFT/ITL per level",
    )
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument(
        "--live-jsonl",
        metavar="FILE|-",
        help="follow the run as JSON lines: a tick a second, a line per level, the results last "
        "(-: stdout, and the table goes to stderr)",
    )
    p.add_argument(
        "--repeat",
        type=positive_int,
        default=BenchConfig.repeat,
        metavar="N",
        help="run the whole sweep N times: outputs and sessions get -1 .. -N, and `tokentop compare LABEL` "
        "(or one of the results files) takes the N runs as one side (the noise between runs)",
    )
    p.add_argument(
        "--reset-cache-between-levels",
        action="store_true",
        help="ask the server to drop its prefix cache before each level after the first (see --reset-cache)",
    )
    p.add_argument(
        "--sim-time-scale",
        type=positive_float,
        default=DemoConfig.time_scale,
        metavar="X",
        help="with no --url: run the simulator X times faster (tests, quick demos)",
    )
    add_record_args(p)
    add_telemetry_args(p)
    add_schedule_arg(p)
    add_ray_args(p, on_node_loss="stop")
    add_ab_args(p)


def bench_config(ns: argparse.Namespace) -> BenchConfig:
    """`tokentop bench`'s flags as its one config; a flag that cannot be used is a `UsageError`."""
    schedule = schedule_from_args(
        ns, levels=bool(ns.concurrency or ns.rate), ends=bool(ns.duration or ns.requests)
    )
    levels = level_targets_from_args(ns) if schedule is None else [lv.target for lv in schedule.levels]
    durations = None if schedule is None else tuple(lv.duration_s for lv in schedule.levels)
    # the dataset (or tokenizer) is checked before the demo simulator starts: a bad file is one line, fast
    workload = workload_from_args(ns)
    server = run_target_from_args(ns, time_scale=ns.sim_time_scale)
    ab = ab_from_args(ns, server.target)
    if ab is not None and ab.mode == "alternate" and ns.duration is None and ns.schedule is None:
        raise UsageError("--ab-mode alternate holds each side for --duration S a level, in turns: give it")
    return BenchConfig(
        server=server,
        workload=workload,
        levels=tuple(levels),
        options=engine_options_from_args(ns),
        level_durations_s=durations,
        workers=ns.workers,
        requests=ns.requests,
        duration_s=ns.duration,
        output=_path(ns.output),
        requests_log=_path(ns.requests_log),
        vllm_results=_path(ns.vllm_results),
        csv=_path(ns.csv),
        plot=_path(ns.plot),
        quiet=ns.quiet,
        live_jsonl=ns.live_jsonl,
        own_metrics=own_metrics_from_args(ns),
        ab=ab,
        repeat=ns.repeat,
        fresh_prompts=ns.repeat_prompts is None,
        reset_cache_between_levels=ns.reset_cache_between_levels,
    )


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def level_targets_from_args(ns: argparse.Namespace) -> list[LoadTarget]:
    """bench's levels, one per ``--concurrency`` or ``--rate`` value (default: one user), or one per
    ``--trace-speed`` with ``--trace``, each replaying the trace from its start."""
    if ns.trace is not None:
        return [
            LoadTarget(mode="trace", speed=float(x), from_start=True, max_concurrency=ns.max_concurrency)
            for x in (ns.trace_speed or [LoadTarget.speed])
        ]
    if ns.rate:
        return [
            LoadTarget(mode="rate", rate=float(r), arrival=ns.arrival, max_concurrency=ns.max_concurrency)
            for r in ns.rate
        ]
    if ns.max_concurrency is not None:
        raise UsageError("--max-concurrency applies to open-loop --rate levels")
    return [
        LoadTarget(mode="concurrency", concurrency=int(c))
        for c in (ns.concurrency or [LoadTarget.concurrency])
    ]


def run(config: BenchConfig) -> int:
    """The sweep (its face imported now, so `tokentop --help` stays light)."""
    from tui.bench.run import run as run_bench

    return run_bench(config)
