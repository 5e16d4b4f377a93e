"""`tokentop watch`: the live app on a `WatchEngine`: the server's own signals, and no load at all."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tui.app.themes import ThemeError, load_themes, resolve_theme
from tui.configs import UsageError, WatchConfig
from tui.outputs import check_outputs
from tui.own_metrics import serve_engine, serving_metrics
from tui.terminal import say

if TYPE_CHECKING:
    from tui.engine.host.watch_engine import WatchEngine
    from tui.engine.telemetry.endpoint import MetricsEndpoint


def run(config: WatchConfig) -> int:
    """Watch until `q`; 0 then, 2 for a usage problem."""
    try:
        themes = load_themes()
        theme = resolve_theme(config.theme, themes)
    except ThemeError as exc:
        raise UsageError(str(exc)) from None
    if config.note is not None:  # left above the app's screen, as the live app does
        print(f"tokentop: {config.note}", file=sys.stderr)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("tokentop watch needs a terminal")
    metrics_log = config.options.server_metrics_log
    check_outputs(
        output=config.output, requests_log=None, server_metrics_log=Path(metrics_log) if metrics_log else None
    )
    from tui.app.app import TokentopApp
    from tui.app.settings import AppSettings

    with serving_metrics(config.own_metrics) as metrics:
        engine = watch_engine(config, metrics)
        engine.start()
        try:
            settings = AppSettings(themes=themes, theme=theme.name, output=config.output, freeze_gc=True,
                                   watch_only=True)  # fmt: skip
            app = TokentopApp(engine, settings)
            result = app.run()
            for note in app.quit_notes:
                say(f"tokentop: {note}")
            return result if isinstance(result, int) else (app.return_code or 0)
        finally:
            engine.stop()


def watch_engine(config: WatchConfig, metrics: MetricsEndpoint | None) -> WatchEngine:
    """The watch's engine (not started), served on ``metrics`` (tokentop's own ``/metrics``): it sends no
    load, so only its run and its canary user's figures."""
    from tui.engine.host.watch_engine import WatchEngine

    engine = WatchEngine(config.target, config.options)
    serve_engine(metrics, engine, load=False)
    return engine
