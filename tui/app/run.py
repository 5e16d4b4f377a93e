"""`tokentop` (the live command): themes, simulator, engine and app, started and stopped in order."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from textual.theme import Theme

from tui.app.themes import ThemeError, load_themes, resolve_theme
from tui.demo import DemoError, running_demo
from tui.engine.config import LoadTarget
from tui.engine.sessions.baseline import Baseline
from tui.engine.sessions.schedule import Schedule
from tui.options import (
    UsageError,
    demo_from_args,
    initial_load,
    target_from_args,
    url_note,
    workload_from_args,
)
from tui.outputs import check_outputs
from tui.session_options import baseline_from_args, recording_engine_options, schedule_from_args
from tui.shutdown import Terminated, exit_status, say, signals_as_interrupt


def run_from_args(ns: argparse.Namespace) -> int:
    """Run the live app; 0 after `q`, 2 for a usage problem (raised as UsageError), 1 if it broke (or the
    engine had stopped on a fatal error), 143/129 after SIGTERM/SIGHUP (which quit like `q`: results
    written, terminal restored)."""
    try:
        themes = load_themes()
        theme = resolve_theme(ns.theme, themes)
    except ThemeError as exc:
        raise UsageError(str(exc)) from None
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the live app needs a terminal; for a headless run use `tokentop bench`")
    demo = demo_from_args(ns)
    schedule = schedule_from_args(ns)
    baseline = baseline_from_args(ns)
    load = initial_load(ns, demo=demo is not None) if schedule is None else schedule.changes[0].target
    requests_log = Path(ns.requests_log) if ns.requests_log else None
    output = Path(ns.output) if ns.output else None
    metrics_log = Path(ns.server_metrics_log) if ns.server_metrics_log else None
    check_outputs(output=output, requests_log=requests_log, server_metrics_log=metrics_log)
    try:
        with running_demo(demo) as demo_url:
            return _run_app(ns, demo_url, load, themes, theme.name, output, requests_log, schedule, baseline)
    except KeyboardInterrupt as exc:  # a signal before or after the app ran: the engine is stopped
        return exit_status(exc)
    except DemoError as exc:
        print(f"tokentop: error: could not start the built-in simulator: {exc}", file=sys.stderr)
        return 1


def _run_app(
    ns: argparse.Namespace,
    demo_url: str | None,
    load: LoadTarget,
    themes: dict[str, Theme],
    theme: str,
    output: Path | None,
    requests_log: Path | None,
    schedule: Schedule | None = None,
    baseline: Baseline | None = None,
) -> int:
    """The engine and the app, against ``demo_url`` or ``--url``; the engine is stopped however it ends."""
    target = target_from_args(ns, demo_url=demo_url)
    if (note := url_note(ns)) is not None:  # left above the app's screen (its header shows the URL)
        print(f"tokentop: {note}", file=sys.stderr)
    workload = workload_from_args(ns)

    from tui.app.app import TokentopApp
    from tui.engine.host.handle import EngineHandle

    engine = EngineHandle(
        target,
        workload,
        load,
        workers=ns.workers,
        requests_log=requests_log,
        options=recording_engine_options(ns),
    )
    try:
        engine.start()
        app = TokentopApp(
            engine,
            themes=themes,
            theme=theme,
            output=output,
            requests_log=requests_log,
            freeze_gc=True,
            slo_ttft_ms=ns.slo_ttft_ms,
            slo_tpot_ms=ns.slo_tpot_ms,
            schedule=[] if schedule is None else [(c.at_s, c.target) for c in schedule.changes[1:]],
            baseline=baseline,
        )
        signalled: list[int] = []

        def on_signal(signum: int) -> None:
            """SIGTERM/SIGHUP while the app runs: quit the way `q` does, on the app's own loop (the handler
            runs on the main thread, which is the loop's)."""
            signalled.append(signum)
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # the app is not running (yet or any more): unwind like Ctrl-C
                raise Terminated(signum) from None
            reason = signal.Signals(signum).name
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(app.action_quit(reason)))

        with signals_as_interrupt(on_signal):
            result = app.run()
        _write_frame_stats(app)
        for note in app.quit_notes:
            say(f"tokentop: {note}")  # after a hang-up there is no terminal to print on
        if signalled:
            return exit_status(Terminated(signalled[0]))
        return result if isinstance(result, int) else (app.return_code or 0)
    finally:
        engine.stop()


def _write_frame_stats(app: Any) -> None:
    """With $TOKENTOP_FRAME_STATS set to a path, write the app's own cost per tick there on exit (JSON; the
    last minute of ticks, summarised, plus each tick's end (``perf_counter_ns``) and work (ns), so a reader
    can take the ticks of its own window). Read by tests/perf/client_targets.py; never fails the app."""
    path = os.environ.get("TOKENTOP_FRAME_STATS")
    if not path:
        return
    fs = app.frame_stats
    data = {
        "fps": fs.fps,
        "ticks": len(fs.work_ns),
        "work_p50_ms": fs.percentile_ms(50),
        "work_p99_ms": fs.percentile_ms(99),
        "snapshot_p50_ms": fs.snapshot_percentile_ms(50),
        "frame_p50_ms": fs.frame_percentile_ms(50),
        "frame_p99_ms": fs.frame_percentile_ms(99),
        "tick_end_ns": list(fs.ends_ns),
        "tick_work_ns": list(fs.work_ns),
    }
    with contextlib.suppress(OSError):
        Path(path).write_text(json.dumps(data) + "\n")
