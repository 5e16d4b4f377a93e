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
from typing import TYPE_CHECKING, Literal

from tui import units
from tui.bench.ab import paired_judge, plan_sides, run_turns, with_b
from tui.bench.feed import LiveFeed
from tui.bench.level_end import counted, default_requests, level_done
from tui.bench.progress import LevelProgress, Progress, load_label
from tui.bench.repeats import repeat_config, set_id
from tui.bench.table import summary
from tui.bench.writing import server_columns, write_run_exports, write_run_plot
from tui.configs import BenchConfig
from tui.demo import DemoError, running_demo
from tui.engine.ab.pair import AbPair
from tui.engine.api import Engine, EngineFactory
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.control.guard import down_s_since, open_outage, outage_outlasted, persistent_failure
from tui.engine.host.handle import EngineHandle
from tui.engine.host.isl_probe import longest_probe_s, skip_reason
from tui.engine.host.probe import Probed, ProbeError, probe_models
from tui.engine.results.files import write_results
from tui.engine.results.model import Results
from tui.engine.snapshot import LevelView, Snapshot
from tui.engine.traces import TraceFeed
from tui.outputs import check_outputs
from tui.own_metrics import serve_engine, serving_metrics
from tui.signals import SIGNAL_STATUSES, exit_status, signals_as_interrupt
from tui.terminal import print_or_drop, say

if TYPE_CHECKING:
    from tui.engine.telemetry.endpoint import MetricsEndpoint

POLL_S = 0.25
"""The face's tick: how often bench looks at a snapshot."""
START_S = 30.0
"""The workers' start, waited for before the first level (after the ISL probe, which has its own bound)."""


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


def _level(snap: Snapshot, level_id: int) -> LevelView | None:
    return next((lv for lv in snap.levels if lv.level_id == level_id), None)


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
    done = float(lv.window_completed + lv.window_failed) if lv is not None and counted(lv) else 0.0
    if goal.unit == "s":  # the time the server was away does not count (`_run_level` adds it)
        done = elapsed_s - (down_s_since(snap.outages, lv.started_s, snap.elapsed_s) if lv else 0.0)
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
        whole_answers=snap.endpoint == "embeddings",
        request_per_s=math.nan if lv is None else lv.request_per_s,
        e2e_p50_ms=math.nan if lv is None else lv.e2el.p50,
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
    the_set = set_id(config)
    runs = [repeat_config(config, k, the_set) for k in range(1, config.repeat + 1)]
    for each in runs:
        check_outputs(
            output=each.output,
            requests_log=each.requests_log,
            server_metrics_log=_path(each.options.server_metrics_log),
            csv=each.csv,
            vllm_results=each.vllm_results,
            plot=each.plot,
        )
    feed = LiveFeed(config.live_jsonl) if config.live_jsonl is not None else None
    demo = config.server.demo
    try:
        with signals_as_interrupt(), serving_metrics(config.own_metrics) as metrics:
            if metrics is not None:
                progress.note(f"serving tokentop's metrics at http://{metrics.host}:{metrics.port}/metrics")
            try:
                if demo is not None:
                    progress.show(f"starting the built-in simulator ({demo.profile})", force=True)
                with running_demo(demo) as demo_url:
                    status = 0
                    for k, each in enumerate(runs, 1):  # the same server for every run of a --repeat
                        if len(runs) > 1:
                            progress.note(f"run {k} of {len(runs)}")
                        status = _run(each, demo_url, progress, engine_factory, probe, feed, metrics)
                        if status != 0:
                            break
            except KeyboardInterrupt as exc:  # while the simulator started or stopped: nothing measured yet
                status = exit_status(exc)
            finally:
                if feed is not None:
                    feed.close()
        if feed is not None and feed.error is not None:
            status = status or 1  # said when it happened: an output asked for is incomplete
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
    feed: LiveFeed | None = None,
    metrics: MetricsEndpoint | None = None,
) -> int:
    """Probe, run every level, print the table and write the results (and the feed's lines, with one); the
    exit status. ``metrics``: tokentop's own endpoint, fed this run's snapshots."""
    err = sys.stderr
    handle: Engine | None = None
    others: list[Engine] = []  # B's engine with --ab: steered as A's is
    pair: AbPair | None = None  # parallel --ab: judges B against A as the app does
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
        sides = plan_sides(config, target, progress, probe)
        if not sides:
            return 1  # B cannot be used (the error said why)
        alternate = config.ab is not None and config.ab.mode == "alternate"
        # probed above (so an unusable target fails before any file is created): not again
        engines = [engine_factory(side.target, side.workload, side.load, workers=config.workers,
                                  requests_log=side.requests_log, options=side.options, probe=False)
                   for side in sides]  # fmt: skip
        handle, others = engines[0], engines[1:]
        serve_engine(metrics, handle)  # A's figures: B's are in the results' ab section
        pair = paired_judge(config.ab, engines)  # before either starts: it keeps every record's samples
        for engine in engines:
            engine.start()
        for engine, side in zip([handle, *others], sides, strict=True):
            if config.options.isl_probe and skip_reason(config.workload) is None:
                _wait_for_the_probe(engine, progress, side.target)
            engine.wait_ready(START_S)
        clock = _RunClock()
        trace_requests = _trace_requests(config.workload)
        for i, load in enumerate(targets, 1):
            if i > 1:
                if config.reset_cache_between_levels and not clock.cache_refused:
                    for engine in [handle, *others]:  # each side's server, with --ab
                        _reset_cache(engine, progress, clock)
                if not alternate:
                    for engine in [handle, *others]:
                        engine.set_load(load)
            duration_s = config.level_duration_s(i - 1)
            if alternate and config.ab is not None and duration_s:  # alternate has level times (tui.cli.ab)
                said = f"[{i}/{len(targets)}] {load_label(load.mode, load.value)} · "
                fatal = run_turns([handle, *others], load, (duration_s, config.ab.block_s), progress, said,
                                  lambda e: _wind_down([e], e.load, target.timeout_s + 5.0))  # fmt: skip
            else:
                fatal = _run_level([handle, *others], config, i, len(targets), load, progress, clock,
                                   duration_s, trace_requests, feed)  # fmt: skip
            if fatal is None and duration_s and i == len(targets):
                # the last level's time is up: it is measured from what arrived in it, so the answers still
                # streaming are cancelled (by the stop below) rather than waited for (manual: ``live``)
                clock.wind_down_s.append(0.0)
            elif fatal is None:
                wind_down_from = time.monotonic()
                fatal = _wind_down([handle, *others], load, target.timeout_s + 5.0)
                clock.wind_down_s.append(time.monotonic() - wind_down_from)
                if feed is not None and fatal is None and i < len(targets):  # the last: from the results
                    feed.level_ended(handle)
            if fatal is not None:
                progress.done()
                print(f"tokentop: error: {fatal}", file=err)
                status = 1
                break
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (`tui.signals`): write what was measured
        status = exit_status(exc)
    finally:
        progress.done()
        for engine in others:
            engine.stop(finish_in_flight=False, timeout_s=2.0)
        if handle is not None:
            handle.stop(finish_in_flight=False, timeout_s=2.0)
            snap = handle.snapshot()
            final = snap
            results: Results | None = None
            if snap.levels and (snap.completed + snap.failed > 0 or _measured(snap)):
                interrupted = "SIGINT" if status == 130 else SIGNAL_STATUSES.get(status)
                doc = handle.results(interrupted=interrupted)
                assert isinstance(doc, Results)  # a load engine's, never a watch's
                results = doc
                if others and config.ab is not None:  # prints both sides' tables and their comparison
                    results = with_b(results, config.ab, (handle, others[0], pair), interrupted, status)
            worker_lost = (
                results is not None and results.interrupted_by == "node_lost"
            )  # a worker: what it measured
            if (status != 1 or worker_lost) and snap.levels and not others:
                table = summary(snap, config.options, *server_columns(results))
                if feed is not None and feed.to_stdout:
                    say(table)  # stdout is the feed's: nothing else goes there
                else:
                    print_or_drop(table)
            if results is not None:
                # the results, then the exports made from that same document (tui.engine.results)
                if feed is not None:
                    feed.results(results)  # the same document as --output, so its last line is the file
                if config.output is not None:
                    write_results(results, config.output)
                    if not config.quiet:
                        say(f"results written to {config.output}")
                status = write_run_exports(results, config, status)
                status = write_run_plot(results, config, status)
            recorded = getattr(handle, "session_path", None)
            lost = getattr(handle, "session_lost", None)
            if lost is not None:
                say(lost.exit_line())  # even with --quiet: an output asked for is incomplete
                status = status or 1
            elif recorded is not None and not config.quiet:
                b_paths = [getattr(e, "session_path", None) for e in others]
                say(f"session recorded to {recorded}" + "".join(f" (B: {p})" for p in b_paths if p))
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
    handles: list[Engine],
    config: BenchConfig,
    i: int,
    n: int,
    load: LoadTarget,
    progress: Progress,
    clock: _RunClock,
    duration_s: float | None,
    trace_requests: int | None = None,
    feed: LiveFeed | None = None,
) -> str | None:
    """Hold ``load`` until the level is done (``duration_s``, else ``--requests``); return a fatal reason
    or None. ``trace_requests``: a trace replayed once holds this many requests, and its level ends when
    they have, whatever the goal. With two ``handles`` (A, B) the progress line is A's and the level ends
    when both sides' would."""
    handle, others = handles[0], handles[1:]
    level_id = handle.level_id
    started = time.monotonic()
    goal_requests = config.requests or default_requests(load.mode, load.value)
    if trace_requests is not None:
        goal_requests = min(goal_requests, trace_requests)
    goal = _Goal(duration_s, "s") if duration_s else _Goal(goal_requests, "requests")
    first = True
    ended_early: str | None = None
    waited_s = 0.0
    """Seconds of the level the server was away: a timed level runs that much longer."""
    while True:
        # the face's tick (bench is a poller, like the app); a timed level ends on its time, not a tick later
        left_s = duration_s + waited_s - (time.monotonic() - started) if duration_s else POLL_S
        time.sleep(min(POLL_S, max(0.01, left_s)))
        snap = handle.snapshot()
        if snap.fatal:
            return snap.fatal
        lv = _level(snap, level_id)
        elapsed_s = time.monotonic() - started
        _say_as_it_happens(snap, progress, clock, handle)
        progress.level(_level_progress(i, n, load, lv, snap, goal, elapsed_s, clock), force=first)
        first = False
        if feed is not None:
            feed.tick(snap, lv, load, config.options.cost_per_hour)
        if (gone_for_good := outage_outlasted(snap.outages, snap.elapsed_s)) is not None:
            return gone_for_good  # the results keep what was measured; exit 1
        done = True
        for side, engine in zip("AB", handles, strict=False):
            side_snap = snap if engine is handle else engine.snapshot()
            if engine is not handle and side_snap.fatal:
                return f"{side}: {side_snap.fatal}"
            side_lv = _level(side_snap, level_id if engine is handle else engine.level_id)
            if side_lv is None:
                done = False
                continue
            # inside an outage the failures say the server is away, not that this level is broken: wait it out
            down = open_outage(side_snap.outages) is not None
            side_waited_s = down_s_since(side_snap.outages, side_lv.started_s, side_snap.elapsed_s)
            if engine is handle:
                waited_s = side_waited_s
            if (early := persistent_failure(side_lv, elapsed_s, side_snap.outages)) is not None:
                ended_early = f"{side}: {early}" if others else early
                if side_snap.completed == 0:
                    return f"{ended_early}: run stopped"  # nothing to measure: the run ends, exit 1
                break
            done = done and level_done(
                side_lv,
                elapsed_s,
                duration_s,
                goal_requests,
                trace_requests,
                down=down,
                waited_s=side_waited_s,
            )
        if ended_early is not None or done:
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


def _reset_cache(handle: Engine, progress: Progress, clock: _RunClock) -> None:
    """Between levels (nothing in flight): drop the server's prefix cache, saying so; after a refusal (its
    line is said once, and is the run's notice) no more are asked for."""
    reset = getattr(handle, "reset_cache", None)  # a load engine's (`EngineHandle.reset_cache`)
    if reset is None:
        return
    outcome = reset()
    progress.note(outcome.line)
    clock.cache_refused = not outcome.done


def _wind_down(handles: list[Engine], load: LoadTarget, timeout_s: float) -> str | None:
    """Pause every side, then wait (bounded) until nothing is in flight on any."""
    for handle in handles:
        handle.set_load(replace(load, paused=True))
    deadline = time.monotonic() + timeout_s
    for side, handle in zip("AB", handles, strict=False):
        while time.monotonic() < deadline:
            snap = handle.snapshot()
            if snap.fatal:
                return f"{side}: {snap.fatal}" if len(handles) > 1 else snap.fatal
            if snap.in_flight == 0:
                break
            time.sleep(0.05)
    return None
