"""`tokentop watch`: no load, only the server's own ``/metrics``. Its flags (the URL and key of the target
group, the server-metrics group, the scrape interval), read into its one `WatchConfig`, and its run."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from tui.argtypes import positive_float
from tui.cli.metrics import add_metrics_args, metrics_from_args
from tui.cli.target import add_api_key_args, api_key_from_args, base_url_from_args, url_note
from tui.cli.telemetry import add_telemetry_args, own_metrics_from_args
from tui.configs import WatchConfig
from tui.engine.config import EngineOptions, TargetConfig


def add_watch_args(p: argparse.ArgumentParser) -> None:
    """Every flag of `tokentop watch`."""
    p.add_argument("--url", help="server base URL, with or without /v1 (default: $OPENAI_BASE_URL)")
    add_api_key_args(p, what="API key for /metrics")
    add_metrics_args(p, canary="the only load watch sends", switch=False)
    p.add_argument(
        "--interval",
        type=positive_float,
        default=EngineOptions.metrics_interval_s,
        metavar="S",
        help="seconds between scrapes",
    )
    p.add_argument("--output", "-o", metavar="results.json", help="write what the server reported on quit")
    p.add_argument("--theme", default=None, metavar="NAME|PATH", help="theme name or theme file")
    add_telemetry_args(p, otlp=False)


def watch_config(ns: argparse.Namespace) -> WatchConfig:
    """`tokentop watch`'s flags: the URL from ``--url`` or ``$OPENAI_BASE_URL`` (as the load commands read
    it), the scrape's options, the key for ``/metrics``."""
    api_key = api_key_from_args(ns)  # first: a key on the command line is hidden before anything can fail
    base_url = base_url_from_args(ns)
    options = replace(EngineOptions(metrics_interval_s=ns.interval), **metrics_from_args(ns))
    target = TargetConfig(base_url=base_url, api_key=api_key)
    output = Path(ns.output) if ns.output else None
    return WatchConfig(
        target=target, options=options, note=url_note(ns), theme=ns.theme, output=output,
        own_metrics=own_metrics_from_args(ns),
    )  # fmt: skip


def run(config: WatchConfig) -> int:
    """The watch face (imported now: `tokentop --help` must not load Textual)."""
    from tui.app.watch import run as run_watch

    return run_watch(config)
