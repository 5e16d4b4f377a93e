"""The headless face: one load level per --concurrency/--rate value, a progress line, a table, results JSON.

The progress display is `tui.bench_progress`; the exports (--vllm-results, --csv) and the plot (--plot) are
made from the results document (`tui.engine.results`).

Drives the same `EngineHandle` as the live app (through the `Engine` protocol, so a test can hand it
another engine). Each level runs until ``--requests`` requests sent in its
steady-state window have finished (default ``max(20, 4 x users)``, or 5 s of arrivals at a rate), or for
``--duration`` seconds; between levels the load is paused until nothing is in flight, so each level starts
from an idle server (as separate ``vllm bench serve`` runs would). After the last ``--duration`` level the
answers still streaming are cancelled, not waited for: the level is measured from what arrived in it.

Exit status: 0 when the run finished with at least one request completed (failed ones allowed), 1 when
the target is unusable (unreachable, the key rejected) or nothing completed (one line says why) or an
output could not be written, 2 for bad flags or an unwritable output path (found before any load), 130 on
Ctrl-C, 143 on SIGTERM, 129 on SIGHUP (each after writing what was measured: `tui.shutdown`).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from tui.bench_progress import LevelProgress, Progress, load_label
from tui.demo import DemoError, running_demo
from tui.engine.api import Engine, EngineFactory
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.guard import persistent_failure
from tui.engine.host.handle import EngineHandle
from tui.engine.host.probe import ProbeError, probe_server
from tui.engine.results.exports import write_exports
from tui.engine.results.files import write_results
from tui.engine.results.model import Results
from tui.engine.results.plot import write_plot
from tui.engine.snapshot import LevelView, Snapshot
from tui.engine.traces import TraceFeed
from tui.options import (
    demo_from_args,
    level_targets_from_args,
    target_from_args,
    url_note,
    workload_from_args,
)
from tui.outputs import check_outputs
from tui.session_options import recording_engine_options, schedule_from_args
from tui.shutdown import SIGNAL_STATUSES, exit_status, print_or_drop, say, signals_as_interrupt

POLL_S = 0.25
"""The face's tick: how often bench looks at a snapshot."""
UNSETTLED_AFTER_S = 5.0
"""A level that is not steady after 4x its request goal (+20) ends, unless it is younger than this: at a
fast server those requests finish within a second, before any steady window is long enough to measure
(`tui.engine.aggregate.levels.MIN_WINDOW_S`), and a level that was about to settle ended unsteady."""


@dataclass(frozen=True)
class _Goal:
    """What ends a level: `value` requests (counted in the steady window) or `value` seconds."""

    value: float
    unit: Literal["requests", "s"]


@dataclass
class _RunClock:
    """When the run began, how long each finished level took and how long its drain took (the progress
    line's run ETA)."""

    started: float = field(default_factory=time.monotonic)
    level_s: list[float] = field(default_factory=list)
    drain_s: list[float] = field(default_factory=list)


TRACE_REQUESTS = 100
"""Requests per trace level by default (each level replays the trace from its start)."""


def default_requests(mode: str, value: float) -> int:
    """Requests per level when neither --requests nor --duration is given."""
    if mode == "concurrency":
        return max(20, 4 * int(value))
    if mode == "trace":
        return TRACE_REQUESTS  # the trace's rate is its own: --duration or --requests to say otherwise
    return max(20, math.ceil(5 * value))


def _ms(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _level(snap: Snapshot, level_id: int) -> LevelView | None:
    return next((lv for lv in snap.levels if lv.level_id == level_id), None)


def _level_progress(
    i: int,
    n: int,
    load: LoadTarget,
    lv: LevelView | None,
    snap: Snapshot,
    goal: _Goal,
    elapsed_s: float,
    clock: _RunClock,
) -> LevelProgress:
    """The progress line's numbers for level ``i`` of ``n`` now."""
    # The goal counts requests in the steady window, so the count does too: before the level is steady its
    # window is provisional (it starts at the load change and moves once a steady start is known), and
    # counting it read "12/8 requests, warming up" with the bar full while the level went on.
    done = 0.0 if lv is None or not lv.steady else float(lv.window_completed + lv.window_failed)
    if goal.unit == "s":
        done = elapsed_s
    phase = "starting" if lv is None else "steady" if lv.steady else "warming up"
    return LevelProgress(
        index=i,
        count=n,
        label=load_label(load.mode, load.value),
        level_elapsed_s=elapsed_s,
        run_elapsed_s=time.monotonic() - clock.started,
        done=done,
        goal=goal.value,
        unit=goal.unit,
        phase=phase,
        finished_level_s=tuple(clock.level_s),
        finished_drain_s=tuple(clock.drain_s),
        failed=0 if lv is None else lv.failed,
        output_tps=snap.output_tps,
        ttft_p50_ms=math.nan if lv is None else lv.ttft.p50,
        itl_p50_ms=math.nan if lv is None else lv.itl_chunk.p50,
        in_flight=snap.in_flight,
    )


def format_table(levels: tuple[LevelView, ...]) -> str:
    """The end-of-run table (stdout)."""
    # A reasoning model's answer starts after its thinking: time to first answer token gets a column then.
    reasoning = any(math.isfinite(lv.reasoning_tokens) for lv in levels)
    cols: tuple[str, ...] = ("level", "done", "fail", "ISL", "OSL", "req/s", "out tok/s", "TTFT p50",
                             "TTFT p99", "TPOT p50", "ITL p50", "ITL p99", "E2E p50", "tok/chunk",
                             "steady")  # fmt: skip
    # A server that reports cached prompt tokens gets the prefix-cache hit rate (cached / prompt tokens).
    cached = any(lv.cache_hit_rate is not None for lv in levels)
    if reasoning:
        cols = (*cols[:9], "TTFA p50", *cols[9:])
    if cached:
        cols = (*cols[:-1], "prefix cache", cols[-1])
    rows: list[tuple[str, ...]] = [cols]
    for lv in levels:
        name = table_name(lv)
        lengths = tuple(f"{x:.1f}" if math.isfinite(x) else "-" for x in (lv.mean_isl, lv.mean_osl))
        row: tuple[str, ...] = (
            name,
            str(lv.window_completed),
            str(lv.window_failed),
            *lengths,
            f"{lv.request_per_s:.2f}" if math.isfinite(lv.request_per_s) else "-",
            f"{lv.output_tps:,.0f}" if math.isfinite(lv.output_tps) else "-",
            _ms(lv.ttft.p50),
            _ms(lv.ttft.p99),
            _ms(lv.tpot.p50),
            _ms(lv.itl_chunk.p50),
            _ms(lv.itl_chunk.p99),
            _ms(lv.e2el.p50),
            f"{lv.tokens_per_chunk:.2f}" if math.isfinite(lv.tokens_per_chunk) else "-",
            "yes" if lv.steady else "no",
        )
        if reasoning:
            row = (*row[:9], _ms(lv.ttfa.p50), *row[9:])
        if cached:
            rate = lv.cache_hit_rate
            hit = "-" if rate is None or not math.isfinite(rate) else f"{rate:.0%}"  # as the app's column
            row = (*row[:-1], hit, row[-1])
        rows.append(row)
    widths = [max(len(r[c]) for r in rows) for c in range(len(cols))]
    lines = []
    for k, r in enumerate(rows):
        lines.append(
            "  ".join(v.rjust(w) if c else v.ljust(w) for c, (v, w) in enumerate(zip(r, widths, strict=True)))
        )
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(
        "(latencies in ms, ISL/OSL mean tokens by the server's count, over each level's steady window)"
    )
    return "\n".join(lines)


def table_name(lv: LevelView) -> str:
    """A level as the table's first column names it: "c=8", "r=2.5/s", "x2"."""
    if lv.mode == "trace":
        return f"x{lv.value:g}"
    return f"c={lv.value:g}" if lv.mode == "concurrency" else f"r={lv.value:g}/s"


def _summary(snap: Snapshot) -> str:
    lines = [format_table(snap.levels)]
    if snap.knee is not None:
        mode, v = snap.load.mode, snap.knee.value
        at = f"speed x{v:g}" if mode == "trace" else f"{v:g} {'users' if mode == 'concurrency' else 'req/s'}"
        lines.append(
            f"knee: {at} ({snap.knee.output_tps:,.0f} output tok/s of a {snap.knee.peak_tps:,.0f} peak)"
        )
    elif limited := [lv for lv in snap.levels if lv.client_limited]:
        at = ", ".join(load_label(lv.mode, lv.value) for lv in limited)
        lines.append(f"knee: not found among the server's levels (the client was the limit at {at})")
    elif len(snap.levels) > 1:
        lines.append("knee: not found (output throughput still rising at the highest level measured)")
    lags = [
        f"{table_name(lv)} p50 {lv.sched_lag.p50:.2f} p99 {lv.sched_lag.p99:.2f}"
        for lv in snap.levels
        if lv.mode == "trace" and lv.sched_lag.n
    ]
    if lags:
        lines.append("send vs schedule (ms, never in TTFT): " + "; ".join(lags))
    if snap.errors:
        lines.append("errors: " + ", ".join(f"{k} {v}" for k, v in snap.errors))
    dropped = sum(lv.dropped for lv in snap.levels)
    if dropped:
        lines.append(
            f"dropped: {dropped} arrivals, due while the server's failures held the open loop (never sent)"
        )
    if snap.health.saturated:
        lines.append("warning: " + snap.health.reason)
    lines.extend("warning: " + notice for notice in snap.notices)
    return "\n".join(lines)


def run_from_args(
    ns: argparse.Namespace,
    *,
    engine_factory: EngineFactory = EngineHandle,
    probe: Callable[[TargetConfig], str] = probe_server,
) -> int:
    """`tokentop bench`. See the module docstring for exit codes. ``engine_factory`` and ``probe`` (which
    checks the server and returns the model) are the real engine's unless a test gives others."""
    schedule = schedule_from_args(ns)
    targets = level_targets_from_args(ns) if schedule is None else [lv.target for lv in schedule.levels]
    durations = None if schedule is None else [lv.duration_s for lv in schedule.levels]
    progress = Progress(sys.stderr, ns.quiet)
    output = Path(ns.output) if ns.output else None
    log_path = Path(ns.requests_log) if ns.requests_log else None
    check_outputs(
        output=output,
        requests_log=log_path,
        server_metrics_log=_path(ns.server_metrics_log),
        csv=_path(ns.csv),
        vllm_results=_path(ns.vllm_results),
        plot=_path(ns.plot),
    )
    # the dataset (or tokenizer) is checked before the demo simulator starts: a bad file is one line, fast
    workload = workload_from_args(ns)
    demo = demo_from_args(ns, time_scale=ns.sim_time_scale)
    try:
        with signals_as_interrupt():
            try:
                if demo is not None:
                    progress.show(f"starting the built-in simulator ({demo.profile})", force=True)
                with running_demo(demo) as demo_url:
                    status = _run(
                        ns, demo_url, workload, targets, output, log_path, progress, engine_factory, probe,
                        durations,
                    )  # fmt: skip
            except KeyboardInterrupt as exc:  # while the simulator started or stopped: nothing measured yet
                status = exit_status(exc)
    except DemoError as exc:
        progress.done()
        say(f"tokentop: error: {exc}")
        return 1
    except OSError as exc:  # an output that failed after the checks (full disk): the rest is written
        progress.done()
        say(f"tokentop: error: cannot write {exc.filename or 'an output'}: {exc.strerror or exc}")
        return 1
    if status == exit_status():
        say("tokentop: interrupted")
    elif status in SIGNAL_STATUSES:
        say(f"tokentop: terminated by {SIGNAL_STATUSES[status]}")
    return status


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _run(
    ns: argparse.Namespace,
    demo_url: str | None,
    workload: WorkloadConfig,
    targets: list[LoadTarget],
    output: Path | None,
    log_path: Path | None,
    progress: Progress,
    engine_factory: EngineFactory,
    probe: Callable[[TargetConfig], str],
    durations: list[float] | None = None,
) -> int:
    """Probe, run every level, print the table and write the results; the exit status. ``durations``:
    each level's own time (``--schedule``), instead of ``--duration`` or ``--requests``."""
    err = sys.stderr
    handle: Engine | None = None
    final: Snapshot | None = None
    status = 0
    try:
        target = target_from_args(ns, demo_url=demo_url)
        if (note := url_note(ns)) is not None:
            progress.note(note)  # the first line: the target came from the environment, not the demo
        # a slow /models would otherwise look like a hung start
        progress.show(f"probing {target.base_url}/models…", force=True)
        try:
            model = probe(target)
        except ProbeError as exc:
            progress.done()
            print(f"tokentop: error: {exc}", file=err)
            return 1
        progress.note(f"model {model} at {target.base_url}")
        target = replace(target, model=model)
        # probed above (so an unusable target fails before any file is created): not again
        handle = engine_factory(target, workload, targets[0], workers=ns.workers, requests_log=log_path,
                                options=recording_engine_options(ns), probe=False)  # fmt: skip
        handle.start()
        handle.wait_ready(30.0)
        clock = _RunClock()
        trace_requests = _trace_requests(workload)
        for i, load in enumerate(targets, 1):
            if i > 1:
                handle.set_load(load)
            duration_s = durations[i - 1] if durations is not None else ns.duration
            fatal = _run_level(handle, ns, i, len(targets), load, progress, clock, duration_s, trace_requests)
            if fatal is None and duration_s and i == len(targets):
                # the last level's time is up: it is measured from what arrived in it, so the answers still
                # streaming are cancelled (by the stop below) rather than waited for (manual: ``live``)
                clock.drain_s.append(0.0)
            elif fatal is None:
                drain_from = time.monotonic()
                fatal = _drain(handle, load, target.timeout_s + 5.0)
                clock.drain_s.append(time.monotonic() - drain_from)
            if fatal is not None:
                progress.done()
                print(f"tokentop: error: {fatal}", file=err)
                status = 1
                break
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (`tui.shutdown`): write what was measured
        status = exit_status(exc)
    finally:
        progress.done()
        if handle is not None:
            handle.stop(drain=False, timeout_s=2.0)
            snap = handle.snapshot()
            final = snap
            if status != 1 and snap.levels:
                print_or_drop(_summary(snap))
            if snap.levels and (snap.completed + snap.failed > 0 or _measured(snap)):
                # the results, then the exports made from that same document (tui.engine.results)
                interrupted = "SIGINT" if status == 130 else SIGNAL_STATUSES.get(status)
                results = handle.results(interrupted=interrupted)
                assert isinstance(results, Results)  # a load engine's, never a watch's
                if output is not None:
                    write_results(results, output)
                    if not ns.quiet:
                        say(f"results written to {output}")
                status = _write_exports(results, ns, status)
                status = _write_plot(results, ns, status)
            recorded = getattr(handle, "session_path", None)
            if recorded is not None and not ns.quiet:
                say(f"session recorded to {recorded}")
    if status == 0 and final is not None and final.completed == 0 and not _measured(final):
        say(f"tokentop: error: {nothing_completed(final)}")
        status = 1
    return status


def _write_exports(results: Results, ns: argparse.Namespace, status: int) -> int:
    """--vllm-results and --csv from the results just written; the exit status (1 if one failed)."""
    vllm_dir = Path(ns.vllm_results) if getattr(ns, "vllm_results", None) else None
    csv_path = Path(ns.csv) if getattr(ns, "csv", None) else None
    try:
        written = write_exports(results, vllm_dir=vllm_dir, csv_path=csv_path)
    except OSError as exc:
        say(f"tokentop: error: cannot write the exports: {exc}")
        return status or 1
    if written and not ns.quiet:
        where = ", ".join(sorted({str(p.parent) for p in written}))
        say(f"exports written: {len(written)} file(s) in {where}")
    return status


def _write_plot(results: Results, ns: argparse.Namespace, status: int) -> int:
    """--plot from the results just written; the exit status (1 if it could not be written)."""
    path = Path(ns.plot) if getattr(ns, "plot", None) else None
    if path is None:
        return status
    try:
        write_plot(results, path)
    except OSError as exc:
        say(f"tokentop: error: cannot write the plot {path}: {exc.strerror or exc}")
        return status or 1
    if not ns.quiet:
        say(f"plot written to {path}")
    return status


def _measured(snap: Snapshot) -> bool:
    """Some level has a throughput from what arrived, though no request finished (answers longer than the
    run)."""
    return any(math.isfinite(lv.output_tps) and lv.output_tps > 0 for lv in snap.levels)


def nothing_completed(snap: Snapshot) -> str:
    """Why a run that finished has no figures, in one line: how many failed and of which classes."""
    if snap.failed == 0:
        return "no request completed within the run (none failed either: allow more time with --duration)"
    classes = ", ".join(f"{k} {v}" for k, v in sorted(snap.errors, key=lambda kv: -kv[1]))
    return f"no request completed: {snap.failed} failed ({classes})"


def _run_level(
    handle: Engine,
    ns: argparse.Namespace,
    i: int,
    n: int,
    load: LoadTarget,
    progress: Progress,
    clock: _RunClock,
    duration_s: float | None,
    trace_requests: int | None = None,
) -> str | None:
    """Hold ``load`` until the level is done (``duration_s``, else ``--requests``); return a fatal reason
    or None. ``trace_requests``: a trace replayed once holds this many requests, and its level ends when
    they have, whatever the goal."""
    level_id = handle.level_id
    started = time.monotonic()
    goal_requests = ns.requests or default_requests(load.mode, load.value)
    if trace_requests is not None:
        goal_requests = min(goal_requests, trace_requests)
    goal = _Goal(duration_s, "s") if duration_s else _Goal(goal_requests, "requests")
    first = True
    ended_early: str | None = None
    while True:
        # the face's tick (bench is a poller, like the app); a timed level ends on its time, not a tick later
        left_s = duration_s - (time.monotonic() - started) if duration_s else POLL_S
        time.sleep(min(POLL_S, max(0.01, left_s)))
        snap = handle.snapshot()
        if snap.fatal:
            return snap.fatal
        lv = _level(snap, level_id)
        elapsed_s = time.monotonic() - started
        progress.level(_level_progress(i, n, load, lv, snap, goal, elapsed_s, clock), force=first)
        first = False
        if lv is None:
            continue
        ended_early = persistent_failure(lv, elapsed_s)
        if ended_early is not None:
            if snap.completed == 0:
                return f"{ended_early}: run stopped"  # nothing to measure: the run ends, exit 1
            break
        if duration_s:
            if elapsed_s >= duration_s:
                break
        elif (
            # over whole requests: an arrivals window counts the requests that ended in it, not those sent
            (
                lv.steady
                and lv.measured_over == "requests"
                and lv.window_completed + lv.window_failed >= goal_requests
            )
            or (lv.completed == 0 and lv.failed >= goal_requests)
            # the trace is over: nothing more will be sent at this speed
            or (trace_requests is not None and lv.completed + lv.failed >= trace_requests)
            # a level that cannot settle (e.g. the server started failing midway) still ends
            or (lv.completed + lv.failed >= 4 * goal_requests + 20 and elapsed_s >= UNSETTLED_AFTER_S)
        ):
            break
    snap = handle.snapshot()
    elapsed_s = time.monotonic() - started
    final = _level_progress(i, n, load, _level(snap, level_id), snap, goal, elapsed_s, clock)
    clock.level_s.append(elapsed_s)
    progress.level(final, keep=True)  # one line per finished level stays, on a terminal too
    if ended_early is not None:
        say(f"tokentop: warning: {load_label(load.mode, load.value)}: {ended_early}: level ended early")
    return None


def _trace_requests(workload: WorkloadConfig) -> int | None:
    """How many requests one pass of the workload's trace sends (the file streamed once, line by line);
    None without a trace, or for a looped one, which never runs out."""
    if workload.trace is None or workload.trace.loop:
        return None
    return sum(1 for _ in TraceFeed(workload.trace))


def _drain(handle: Engine, load: LoadTarget, timeout_s: float) -> str | None:
    """Pause and wait (bounded) until nothing is in flight."""
    handle.set_load(replace(load, paused=True))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        snap = handle.snapshot()
        if snap.fatal:
            return snap.fatal
        if snap.in_flight == 0:
            return None
        time.sleep(0.05)
    return None
