"""The server-metrics group: where and how the server's own ``/metrics`` is scraped, a canary user beside
the load, the GPU beside the server. Declared once for the commands that send load and for watch (which
sends none, so its canary is its only load and it has no switch to turn the scrape off)."""

from __future__ import annotations

import argparse
from typing import Any

from tui.argtypes import positive_float
from tui.configs import UsageError

CANARY_BESIDE_LOAD = "beside the load, never counted in it"
"""``--canary-rate``'s help where there is load (live, bench); watch's says the canary is its only load."""


def add_metrics_args(
    p: argparse.ArgumentParser, *, canary: str = CANARY_BESIDE_LOAD, switch: bool = True
) -> None:
    """``--metrics-url``, ``--server-metrics-log``, ``--canary-rate``, ``--gpu-metrics`` and, with
    ``switch``, ``--no-server-metrics`` (without it the scrape is always on)."""
    g = p.add_argument_group("server metrics (the server's own view, from its Prometheus /metrics)")
    g.add_argument(
        "--metrics-url", metavar="URL", help="where to scrape (default: /metrics beside the URL's /v1)"
    )
    g.add_argument(
        "--server-metrics-log",
        metavar="PATH",
        help="append one JSON line per scrape (for plots after the run)",
    )
    g.add_argument(
        "--canary-rate",
        type=positive_float,
        metavar="R",
        help=f"a canary user: R one-token requests/s {canary} (the TTFT a new user sees now)",
    )
    g.add_argument(
        "--gpu-metrics",
        metavar="URL|nvml",
        help="the GPU beside the server: a DCGM exporter's URL (port 9400 by default), or nvml on this host",
    )
    if switch:
        g.add_argument(
            "--no-server-metrics",
            dest="server_metrics",
            action="store_false",
            help="do not scrape the server's /metrics",
        )
    else:
        p.set_defaults(server_metrics=True)


def metrics_from_args(ns: argparse.Namespace) -> dict[str, Any]:
    """The `EngineOptions` fields of the scrape, each checked before any load in one line: a
    ``--metrics-url`` that is no URL, a ``--gpu-metrics`` that cannot be read, a canary with the scrape
    off (its figures live in the server pane and summaries)."""
    metrics_url: str | None = ns.metrics_url
    if metrics_url is not None and not metrics_url.startswith(("http://", "https://")):
        raise UsageError(f"--metrics-url must start with http:// or https://: {metrics_url!r}")
    if ns.canary_rate is not None and not ns.server_metrics:
        raise UsageError("--canary-rate is shown beside the server's metrics: drop --no-server-metrics")
    return {
        "server_metrics": ns.server_metrics,
        "metrics_url": metrics_url,
        "server_metrics_log": ns.server_metrics_log,
        "gpu_metrics": _gpu_metrics(ns.gpu_metrics),
        "canary_rate": ns.canary_rate,
    }


def _gpu_metrics(spec: str | None) -> str | None:
    """``--gpu-metrics``, checked before any load: a URL, or `nvml` with NVML importable."""
    if spec is None:
        return None
    from tui.engine.server_metrics.gpu_source import NVML, nvml_source

    if spec == NVML:
        try:
            nvml_source()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    elif not spec.startswith(("http://", "https://")):
        raise UsageError(f"--gpu-metrics takes a DCGM exporter's URL (http://...) or 'nvml', got {spec!r}")
    return spec
