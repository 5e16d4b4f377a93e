"""The headless face: one load level per --concurrency/--rate value, a progress line, a table, results JSON.

The progress display is `tui.bench.progress`, the end-of-run table `tui.bench.table`; the exports
(--vllm-results, --csv) and the plot (--plot) are made from the results document (`tui.engine.results`).

Drives the same `EngineHandle` as the live app (through the `Engine` protocol, so a test can hand it
another engine). Each level runs until ``--requests`` requests sent in its
steady-state window have finished (default ``max(20, 4 x users)``, or 5 s of arrivals at a rate), or for
``--duration`` seconds; between levels the load is paused until nothing is in flight, so each level starts
from an idle server (as separate ``vllm bench serve`` runs would). After the last ``--duration`` level the
answers still streaming are cancelled, not waited for: the level is measured from what arrived in it.

Exit status: 0 when the run finished with at least one request completed (failed ones allowed), 1 when
the target is unusable (unreachable, the key rejected) or nothing completed (one line says why) or an
output could not be written, 2 for bad flags or an unwritable output path (found before any load), 130 on
Ctrl-C, 143 on SIGTERM, 129 on SIGHUP (each after writing what was measured: `tui.signals`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from tui import units
from tui.bench.progress import LevelProgress, Progress, load_label
from tui.bench.table import summary
from tui.configs import BenchConfig
from tui.demo import DemoError, running_demo
from tui.engine.api import Engine, EngineFactory
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.control.guard import persistent_failure
from tui.engine.host.handle import EngineHandle
from tui.engine.host.isl_probe import longest_probe_s, skip_reason
from tui.engine.host.probe import Probed, ProbeError, probe_models
from tui.engine.results.exports import write_exports
from tui.engine.results.files import write_results
from tui.engine.results.model import Results
from tui.engine.results.plot import write_plot
from tui.engine.snapshot import LevelView, Snapshot
from tui.engine.traces import TraceFeed
from tui.outputs import check_outputs
from tui.signals import SIGNAL_STATUSES, exit_status, signals_as_interrupt
from tui.terminal import print_or_drop, say

POLL_S = 0.25
"""The face's tick: how often bench looks at a snapshot."""
START_S = 30.0
"""The workers' start, waited for before the first level (after the ISL probe, which has its own bound)."""
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
    """When the run began, how long each finished level took and how long its wind-down took (the progress
    line's run ETA)."""

    started: float = field(default_factory=time.monotonic)
    level_s: list[float] = field(default_factory=list)
    wind_down_s: list[float] = field(default_factory=list)
    said: set[str] = field(default_factory=set)
    """The outage and session lines already printed (each is said once)."""
    cache_refused: bool = False
    """The server refused a prefix-cache reset: no more are asked for."""


TRACE_REQUESTS = 100
"""Requests per trace level by default (each level replays the trace from its start)."""


def default_requests(mode: str, value: float) -> int:
    """Requests per level when neither --requests nor --duration is given."""
    if mode == "concurrency":
        return max(20, 4 * int(value))
    if mode == "trace":
        return TRACE_REQUESTS  # the trace's rate is its own: --duration or --requests to say otherwise
    return max(20, math.ceil(5 * value))


def _level(snap: Snapshot, level_id: int) -> LevelView | None:
    return next((lv for lv in snap.levels if lv.level_id == level_id), None)


def _counted(lv: LevelView | None) -> bool:
    """The level's window counts toward its goal: steady, or over the server's up-time after an outage."""
    return lv is not None and (lv.steady or (lv.down_s > 0 and not lv.too_short))


def _outage_lines(snap: Snapshot) -> list[str]:
    """What to say of the run's outages: when the server stopped answering and when it was back."""
    lines = []
    for o in snap.outages:
        lines.append(f"the server stopped answering at {units.elapsed(o.start_s)} ({o.cause})")
        if o.end_s is not None:
            lines.append(f"the server is back at {units.elapsed(o.end_s)} (down {o.end_s - o.start_s:.1f} s)")
    return lines


def _say_as_it_happens(snap: Snapshot, progress: Progress, clock: _RunClock, handle: Engine) -> None:
    """The outages' lines and a session that stopped recording, each once, as they happen."""
    lost = getattr(handle, "session_lost", None)
    for line in [*_outage_lines(snap), *([] if lost is None else [lost.line()])]:
        if line not in clock.said:
            clock.said.add(line)
            progress.note(line)


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
    done = float(lv.window_completed + lv.window_failed) if lv is not None and _counted(lv) else 0.0
    if goal.unit == "s":
        done = elapsed_s
    phase = "starting" if lv is None else "steady" if lv.steady else "warming up"
    if snap.outages and snap.outages[-1].end_s is None:
        phase = "server down"
    elif lv is not None and lv.down_s > 0:
        phase = f"not steady: server down {lv.down_s:.0f} s"
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
        finished_wind_down_s=tuple(clock.wind_down_s),
        failed=0 if lv is None else lv.failed,
        output_tps=snap.output_tps,
        ttft_p50_ms=math.nan if lv is None else lv.ttft.p50,
        itl_p50_ms=math.nan if lv is None else lv.itl_chunk.p50,
        in_flight=snap.in_flight,
    )


def run(
    config: BenchConfig,
    *,
    engine_factory: EngineFactory = EngineHandle,
    probe: Callable[[TargetConfig], Probed] = probe_models,
) -> int:
    """`tokentop bench`. See the module docstring for exit codes. ``engine_factory`` and ``probe`` (which
    checks the server and returns the model) are the real engine's unless a test gives others."""
    progress = Progress(sys.stderr, config.quiet)
    check_outputs(
        output=config.output,
        requests_log=config.requests_log,
        server_metrics_log=_path(config.options.server_metrics_log),
        csv=config.csv,
        vllm_results=config.vllm_results,
        plot=config.plot,
    )
    demo = config.server.demo
    try:
        with signals_as_interrupt():
            try:
                if demo is not None:
                    progress.show(f"starting the built-in simulator ({demo.profile})", force=True)
                with running_demo(demo) as demo_url:
                    status = _run(config, demo_url, progress, engine_factory, probe)
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
    config: BenchConfig,
    demo_url: str | None,
    progress: Progress,
    engine_factory: EngineFactory,
    probe: Callable[[TargetConfig], Probed],
) -> int:
    """Probe, run every level, print the table and write the results; the exit status."""
    err = sys.stderr
    handle: Engine | None = None
    final: Snapshot | None = None
    status = 0
    try:
        target = config.server.at(demo_url)
        targets = config.levels
        if (note := config.server.note) is not None:
            progress.note(note)  # the first line: the target came from the environment, not the demo
        # a slow /models would otherwise look like a hung start
        progress.show(f"probing {target.base_url}/models…", force=True)
        try:
            probed = probe(target)
        except ProbeError as exc:
            progress.done()
            print(f"tokentop: error: {exc}", file=err)
            return 1
        picked = probed.note(target.model)
        progress.note(f"model {probed.model} at {target.base_url}" + (f" ({picked})" if picked else ""))
        target = replace(target, model=probed.model)
        # probed above (so an unusable target fails before any file is created): not again
        handle = engine_factory(target, config.workload, targets[0], workers=config.workers,
                                requests_log=config.requests_log, options=config.options,
                                probe=False)  # fmt: skip
        handle.start()
        if config.options.isl_probe and skip_reason(config.workload) is None:
            _wait_for_the_probe(handle, progress, target)
        handle.wait_ready(START_S)
        clock = _RunClock()
        trace_requests = _trace_requests(config.workload)
        for i, load in enumerate(targets, 1):
            if i > 1:
                if config.reset_cache_between_levels and not clock.cache_refused:
                    _reset_cache(handle, progress, clock)
                handle.set_load(load)
            duration_s = config.level_duration_s(i - 1)
            fatal = _run_level(
                handle, config, i, len(targets), load, progress, clock, duration_s, trace_requests
            )
            if fatal is None and duration_s and i == len(targets):
                # the last level's time is up: it is measured from what arrived in it, so the answers still
                # streaming are cancelled (by the stop below) rather than waited for (manual: ``live``)
                clock.wind_down_s.append(0.0)
            elif fatal is None:
                wind_down_from = time.monotonic()
                fatal = _wind_down(handle, load, target.timeout_s + 5.0)
                clock.wind_down_s.append(time.monotonic() - wind_down_from)
            if fatal is not None:
                progress.done()
                print(f"tokentop: error: {fatal}", file=err)
                status = 1
                break
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (`tui.signals`): write what was measured
        status = exit_status(exc)
    finally:
        progress.done()
        if handle is not None:
            handle.stop(finish_in_flight=False, timeout_s=2.0)
            snap = handle.snapshot()
            final = snap
            results: Results | None = None
            if snap.levels and (snap.completed + snap.failed > 0 or _measured(snap)):
                interrupted = "SIGINT" if status == 130 else SIGNAL_STATUSES.get(status)
                made = handle.results(interrupted=interrupted)
                assert isinstance(made, Results)  # a load engine's, never a watch's
                results = made
            if status != 1 and snap.levels:
                print_or_drop(summary(snap, _server_hits(results)))
            if results is not None:
                # the results, then the exports made from that same document (tui.engine.results)
                if config.output is not None:
                    write_results(results, config.output)
                    if not config.quiet:
                        say(f"results written to {config.output}")
                status = _write_exports(results, config, status)
                status = _write_plot(results, config, status)
            recorded = getattr(handle, "session_path", None)
            lost = getattr(handle, "session_lost", None)
            if lost is not None:
                say(lost.exit_line())  # even with --quiet: an output asked for is incomplete
                status = status or 1
            elif recorded is not None and not config.quiet:
                say(f"session recorded to {recorded}")
    if status == 0 and final is not None and final.completed == 0 and not _measured(final):
        say(f"tokentop: error: {nothing_completed(final)}")
        status = 1
    return status


def _wait_for_the_probe(handle: Engine, progress: Progress, target: TargetConfig) -> None:
    """The ISL probe runs before the workers start: a few one-token prompts (up to 1,024 tokens for a
    trace), a prefill each, which on a slow server is tens of seconds of silence; the line says so."""
    started = time.monotonic()
    deadline = started + longest_probe_s(target)
    first = True
    while time.monotonic() < deadline:
        elapsed = units.clock(time.monotonic() - started)
        progress.show(f"sizing prompts to the server's token count (the ISL probe)… {elapsed}", force=first)
        first = False
        if handle.wait_ready(POLL_S):
            return


def _write_exports(results: Results, config: BenchConfig, status: int) -> int:
    """--vllm-results and --csv from the results just written; the exit status (1 if one failed)."""
    try:
        written = write_exports(results, vllm_dir=config.vllm_results, csv_path=config.csv)
    except OSError as exc:
        say(f"tokentop: error: cannot write the exports: {exc}")
        return status or 1
    if written and not config.quiet:
        where = ", ".join(sorted({str(p.parent) for p in written}))
        say(f"exports written: {len(written)} file(s) in {where}")
    return status


def _write_plot(results: Results, config: BenchConfig, status: int) -> int:
    """--plot from the results just written; the exit status (1 if it could not be written)."""
    path = config.plot
    if path is None:
        return status
    try:
        write_plot(results, path)
    except OSError as exc:
        say(f"tokentop: error: cannot write the plot {path}: {exc.strerror or exc}")
        return status or 1
    if not config.quiet:
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
    config: BenchConfig,
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
    goal_requests = config.requests or default_requests(load.mode, load.value)
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
        _say_as_it_happens(snap, progress, clock, handle)
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
                _counted(lv)
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


def _server_hits(results: Results | None) -> dict[int, float | None]:
    """Each level's prefix-cache hit rate by the server's counters, for the table."""
    if results is None:
        return {}
    return {lv.level_id: lv.server.prefix_cache_hit_rate for lv in results.levels if lv.server is not None}


def _trace_requests(workload: WorkloadConfig) -> int | None:
    """How many requests one pass of the workload's trace sends (the file streamed once, line by line);
    None without a trace, or for a looped one, which never runs out."""
    if workload.trace is None or workload.trace.loop:
        return None
    return sum(1 for _ in TraceFeed(workload.trace))


def _reset_cache(handle: Engine, progress: Progress, clock: _RunClock) -> None:
    """Between levels (nothing in flight): drop the server's prefix cache, saying so; after a refusal (its
    line is said once, and is the run's notice) no more are asked for."""
    reset = getattr(handle, "reset_cache", None)  # a load engine's (`EngineHandle.reset_cache`)
    if reset is None:
        return
    outcome = reset()
    progress.note(outcome.line)
    clock.cache_refused = not outcome.done


def _wind_down(handle: Engine, load: LoadTarget, timeout_s: float) -> str | None:
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
