"""`tokentop` (the live command): themes, simulator, engine and app, started and stopped in order."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.theme import Theme

from tui.app.themes import ThemeError, load_themes, resolve_theme
from tui.configs import LiveConfig, UsageError
from tui.demo import DemoError, running_demo
from tui.outputs import check_outputs
from tui.own_metrics import serve_engine, serving_metrics
from tui.signals import Terminated, exit_status, signals_as_interrupt
from tui.terminal import say

if TYPE_CHECKING:
    from tui.app.settings import AppSettings
    from tui.engine.api import Engine
    from tui.engine.config import TargetConfig
    from tui.engine.telemetry.endpoint import MetricsEndpoint


def run(config: LiveConfig) -> int:
    """Run the live app; 0 after `q`, 2 for a usage problem (raised as UsageError), 1 if it broke (or the
    engine had stopped on a fatal error), 143/129 after SIGTERM/SIGHUP (which quit like `q`: results
    written, terminal restored)."""
    try:
        themes = load_themes()
        theme = resolve_theme(config.theme, themes)
    except ThemeError as exc:
        raise UsageError(str(exc)) from None
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the live app needs a terminal; for a headless run use `tokentop bench`")
    metrics_log = config.options.server_metrics_log
    check_outputs(
        output=config.output,
        requests_log=config.requests_log,
        server_metrics_log=Path(metrics_log) if metrics_log else None,
    )
    try:
        with serving_metrics(config.own_metrics) as metrics, running_demo(config.server.demo) as demo_url:
            return _run_app(config, demo_url, themes, theme.name, metrics)
    except KeyboardInterrupt as exc:  # a signal before or after the app ran: the engine is stopped
        return exit_status(exc)
    except DemoError as exc:
        print(f"tokentop: error: could not start the built-in simulator: {exc}", file=sys.stderr)
        return 1


def _run_app(
    config: LiveConfig,
    demo_url: str | None,
    themes: dict[str, Theme],
    theme: str,
    metrics: MetricsEndpoint | None = None,
) -> int:
    """The engine and the app, against ``demo_url`` or ``--url``; the engine is stopped however it ends.
    ``metrics``: tokentop's own endpoint, fed the engine's snapshots."""
    target = config.server.at(demo_url)
    if config.server.note is not None:  # left above the app's screen (its header shows the URL)
        print(f"tokentop: {config.server.note}", file=sys.stderr)

    from tui.app.app import TokentopApp

    engine = live_engine(config, target, metrics)
    try:
        engine.start()
        app = TokentopApp(engine, app_settings(config, themes, theme))
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


def live_engine(config: LiveConfig, target: TargetConfig, metrics: MetricsEndpoint | None) -> Engine:
    """The live app's engine (`make_engine`, not started), its snapshots served on ``metrics`` (tokentop's
    own ``/metrics``) from now on."""
    engine = make_engine(config, target)
    serve_engine(metrics, engine)
    return engine


def app_settings(config: LiveConfig, themes: dict[str, Theme], theme: str) -> AppSettings:
    """What the live app takes from its config."""
    from tui.app.settings import AppSettings

    return AppSettings(
        themes=themes,
        theme=theme,
        output=config.output,
        requests_log=config.requests_log,
        freeze_gc=True,
        slo_ttft_ms=config.options.slo_ttft_ms,
        slo_tpot_ms=config.options.slo_tpot_ms,
        slo_e2e_ms=config.options.slo_e2e_ms,
        slo_target=config.options.slo_target,
        cost_per_hour=config.options.cost_per_hour,
        schedule=config.schedule,
        baseline=config.baseline,
    )


def make_engine(config: LiveConfig, target: TargetConfig) -> Engine:
    """The app's engine against ``target``, not started: one `EngineHandle`, or with ``--ab`` a pair of them
    under the same keys (`tui.engine.ab.pair`), B's requests log and session beside A's."""
    from tui.engine.host.handle import EngineHandle

    engine: Engine = EngineHandle(target, config.workload, config.load, workers=config.workers,
                                  requests_log=config.requests_log, options=config.options)  # fmt: skip
    if (ab := config.ab) is not None:
        from tui.engine.ab.pair import AbPair, b_file, b_options, b_workload

        log = None if config.requests_log is None else b_file(config.requests_log)
        b = EngineHandle(ab.target, b_workload(config.workload, ab.mode), config.load, workers=config.workers,
                         requests_log=log, options=b_options(config.options))  # fmt: skip
        engine = AbPair(engine, b, mode=ab.mode, threshold_pct=ab.threshold_pct, block_s=ab.block_s)
    return engine


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
