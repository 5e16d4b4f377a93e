"""`tokentop watch`: the live app on a `WatchEngine`: the server's own signals, and no load at all."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tui.app.themes import ThemeError, load_themes, resolve_theme
from tui.engine.config import EngineOptions, TargetConfig
from tui.options import UsageError, base_url_from_args, gpu_metrics_from_args, url_note
from tui.outputs import check_outputs
from tui.shutdown import say


def watch_target(ns: argparse.Namespace) -> tuple[TargetConfig, EngineOptions]:
    """The target and scrape options from `tokentop watch`'s flags: the URL from ``--url`` or
    ``$OPENAI_BASE_URL`` as for the load commands (a bad one is a usage error)."""
    base_url = base_url_from_args(ns)
    if ns.metrics_url is not None and not ns.metrics_url.startswith(("http://", "https://")):
        raise UsageError(f"--metrics-url must start with http:// or https://: {ns.metrics_url!r}")
    api_key = ns.api_key or os.environ.get("OPENAI_API_KEY") or None
    options = EngineOptions(
        metrics_url=ns.metrics_url,
        metrics_interval_s=ns.interval,
        server_metrics_log=ns.server_metrics_log,
        gpu_metrics=gpu_metrics_from_args(ns),
        canary_rate=ns.canary_rate,
    )
    return TargetConfig(base_url=base_url, api_key=api_key), options


def run_from_args(ns: argparse.Namespace) -> int:
    """Watch until `q`; 0 then, 2 for a usage problem."""
    try:
        themes = load_themes()
        theme = resolve_theme(ns.theme, themes)
    except ThemeError as exc:
        raise UsageError(str(exc)) from None
    target, options = watch_target(ns)
    if (note := url_note(ns)) is not None:  # left above the app's screen, as the live app does
        print(f"tokentop: {note}", file=sys.stderr)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("tokentop watch needs a terminal")
    output = Path(ns.output) if ns.output else None
    metrics_log = Path(ns.server_metrics_log) if ns.server_metrics_log else None
    check_outputs(output=output, requests_log=None, server_metrics_log=metrics_log)
    from tui.app.app import TokentopApp
    from tui.engine.host.watch import WatchEngine

    engine = WatchEngine(target, options)
    engine.start()
    try:
        app = TokentopApp(
            engine,
            themes=themes,
            theme=theme.name,
            output=output,
            freeze_gc=True,
            watch_only=True,
        )
        result = app.run()
        for note in app.quit_notes:
            say(f"tokentop: {note}")
        return result if isinstance(result, int) else (app.return_code or 0)
    finally:
        engine.stop()
