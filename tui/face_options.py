"""Flags to each face's one config: the namespace read once, here, into the frozen `tui.configs` value a
face's run function takes (the load faces, and the commands over saved runs: sessions, replay, compare,
plot, export). Built on `tui.options` (targets, workloads, engine options) and `tui.session_options`
(recording, ``--schedule``, ``--baseline``); `tui.cli` calls these, a face never does."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.configs import (
    BenchConfig,
    CalibrateConfig,
    CompareConfig,
    CompareForm,
    ExportConfig,
    LiveConfig,
    PlotConfig,
    ReplayConfig,
    RunTarget,
    SessionsConfig,
    WatchConfig,
)
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig
from tui.options import (
    UsageError,
    api_key_from_args,
    base_url_from_args,
    demo_from_args,
    gpu_metrics_from_args,
    initial_load,
    level_targets_from_args,
    target_from_args,
    url_note,
)
from tui.session_options import (
    baseline_from_args,
    find_run,
    recording_engine_options,
    schedule_from_args,
    sessions_dir,
)
from tui.workload_options import workload_from_args

DEMO_URL_UNTIL_STARTED = "http://127.0.0.1"
"""The simulator's address before it runs; its port is known once it does (`RunTarget.at`)."""


def run_target_from_args(ns: argparse.Namespace, *, time_scale: float = 1.0) -> RunTarget:
    """The server a load face runs against, every flag of it checked now (before any simulator starts)."""
    demo = demo_from_args(ns, time_scale=time_scale)
    target = target_from_args(ns, demo_url=DEMO_URL_UNTIL_STARTED if demo is not None else None)
    return RunTarget(target=target, demo=demo, note=url_note(ns))


def bench_config(ns: argparse.Namespace) -> BenchConfig:
    """`tokentop bench`'s flags as its one config; a flag that cannot be used is a `UsageError`."""
    schedule = schedule_from_args(ns)
    levels = level_targets_from_args(ns) if schedule is None else [lv.target for lv in schedule.levels]
    durations = None if schedule is None else tuple(lv.duration_s for lv in schedule.levels)
    # the dataset (or tokenizer) is checked before the demo simulator starts: a bad file is one line, fast
    workload = workload_from_args(ns)
    return BenchConfig(
        server=run_target_from_args(ns, time_scale=ns.sim_time_scale),
        workload=workload,
        levels=tuple(levels),
        options=recording_engine_options(ns),
        level_durations_s=durations,
        workers=ns.workers,
        requests=ns.requests,
        duration_s=ns.duration,
        output=_path(ns.output),
        requests_log=_path(ns.requests_log),
        vllm_results=_path(getattr(ns, "vllm_results", None)),
        csv=_path(getattr(ns, "csv", None)),
        plot=_path(getattr(ns, "plot", None)),
        quiet=bool(ns.quiet),
    )


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def live_config(ns: argparse.Namespace) -> LiveConfig:
    """The live app's flags as its one config; a flag that cannot be used is a `UsageError`."""
    server = run_target_from_args(ns)
    schedule = schedule_from_args(ns)
    changes: tuple[tuple[float, LoadTarget], ...] = ()
    if schedule is None:
        load = initial_load(ns, demo=server.demo is not None)
    else:
        load, changes = schedule.changes[0].target, tuple((c.at_s, c.target) for c in schedule.changes[1:])
    return LiveConfig(
        server=server,
        workload=workload_from_args(ns),
        load=load,
        options=recording_engine_options(ns),
        workers=ns.workers,
        theme=ns.theme,
        output=_path(ns.output),
        requests_log=_path(ns.requests_log),
        schedule=changes,
        baseline=baseline_from_args(ns),
    )


def watch_config(ns: argparse.Namespace) -> WatchConfig:
    """`tokentop watch`'s flags: the URL from ``--url`` or ``$OPENAI_BASE_URL`` (as the load commands read
    it), the scrape's options, the key for ``/metrics``."""
    base_url = base_url_from_args(ns)
    metrics_url = ns.metrics_url
    if metrics_url is not None and not metrics_url.startswith(("http://", "https://")):
        raise UsageError(f"--metrics-url must start with http:// or https://: {metrics_url!r}")
    options = EngineOptions(
        metrics_url=metrics_url,
        metrics_interval_s=ns.interval,
        server_metrics_log=ns.server_metrics_log,
        gpu_metrics=gpu_metrics_from_args(ns),
        canary_rate=ns.canary_rate,
    )
    target = TargetConfig(base_url=base_url, api_key=api_key_from_args(ns))
    return WatchConfig(
        target=target, options=options, note=url_note(ns), theme=ns.theme, output=_path(ns.output)
    )


def calibrate_config(ns: argparse.Namespace) -> CalibrateConfig:
    """`tokentop calibrate`'s flags as its one config."""
    return CalibrateConfig(
        token_rate=ns.token_rate,
        p99_budget_ms=ns.p99_budget_ms,
        workers=ns.workers,
        max_streams=ns.max_streams,
        step_duration_s=ns.step_duration,
        lockstep=bool(getattr(ns, "lockstep", False)),
    )


def sessions_config(ns: argparse.Namespace) -> SessionsConfig:
    """`tokentop sessions`: ``--dir``, or the folder every run records into by default."""
    return SessionsConfig(folder=Path(ns.dir) if ns.dir else sessions_dir())


def replay_config(ns: argparse.Namespace) -> ReplayConfig:
    """`tokentop replay SESSION`'s flags."""
    return ReplayConfig(session=Path(ns.session), theme=ns.theme, speed=ns.speed)


def compare_config(ns: argparse.Namespace) -> CompareConfig:
    """`tokentop compare RUN RUN...`'s flags; fewer than two runs is a `UsageError`."""
    if len(ns.runs) < 2:
        raise UsageError("compare needs at least two runs")
    form: CompareForm = "json" if ns.json else "markdown" if ns.markdown else "text"
    sides = tuple(tuple(find_run(part) for part in run.split(",") if part) for run in ns.runs)
    return CompareConfig(runs=sides, form=form, plot=_path(ns.plot), threshold_pct=ns.threshold)


def plot_config(ns: argparse.Namespace) -> PlotConfig:
    """`tokentop plot RESULTS`'s flags; an ``--out`` that is not an SVG is a `UsageError`."""
    out = _path(ns.out)
    if out is not None and out.suffix.lower() != ".svg":
        raise UsageError(f"--out {out}: the plot is SVG: give a name ending in .svg")
    return PlotConfig(source=Path(ns.results), out=out)


def export_config(ns: argparse.Namespace) -> ExportConfig:
    """`tokentop export RESULTS --to ...`'s flags; a flag the export cannot use, or one it needs and was not
    given (AIPerf's per-request records), is a `UsageError`."""
    if ns.append and ns.to != "vllm":
        raise UsageError("--append is vLLM's --append-result layout: only with --to vllm")
    if ns.to == "aiperf" and not ns.requests_log:
        raise UsageError(
            "--to aiperf needs the per-request records, which the results file does not hold: give the run's "
            "--requests-log FILE (bench and the app write it with --requests-log)"
        )
    return ExportConfig(
        source=Path(ns.results),
        to=ns.to,
        out=_path(ns.out),
        append=bool(ns.append),
        requests_log=_path(ns.requests_log),
    )
