"""tokentop's own telemetry group: its ``/metrics`` for Prometheus (``--serve-metrics-port``,
``--serve-metrics-host``) and, where there is load, a span per request to an OTLP collector
(``--otlp-endpoint``).

Not ``--metrics-port``: the server-metrics group's ``--metrics-url`` already names the server's own
``/metrics``, and a ``--metrics-port`` beside it would read as that scrape's port. ``serve`` says which way
the metrics go."""

from __future__ import annotations

import argparse
import importlib.util
import secrets
from typing import Any

from tui.argtypes import port_number
from tui.configs import OwnMetrics, UsageError


def add_telemetry_args(p: argparse.ArgumentParser, *, otlp: bool = True) -> None:
    """``--serve-metrics-port``, ``--serve-metrics-host`` and, with ``otlp`` (a command that sends load),
    ``--otlp-endpoint``."""
    g = p.add_argument_group(
        "tokentop's own telemetry (for Prometheus and OpenTelemetry; `tokentop help monitoring`)"
    )
    g.add_argument(
        "--serve-metrics-port",
        type=port_number,
        metavar="N",
        help="serve tokentop's own Prometheus /metrics on this port (the client's view, tokentop_*)",
    )
    g.add_argument(
        "--serve-metrics-host",
        default=OwnMetrics.host,
        metavar="HOST",
        help=f"the address it listens on (default {OwnMetrics.host}; 0.0.0.0 for every interface)",
    )
    if otlp:
        g.add_argument(
            "--otlp-endpoint",
            metavar="URL",
            help="send a span per request to this OTLP/HTTP collector (its /v1/traces) and a W3C traceparent "
            "to the server; needs tokentop[otel]",
        )


def own_metrics_from_args(ns: argparse.Namespace) -> OwnMetrics:
    """``--serve-metrics-*``; a host without a port is refused (it would serve nothing)."""
    port: int | None = ns.serve_metrics_port
    host: str = ns.serve_metrics_host
    if port is None and host != OwnMetrics.host:
        raise UsageError("--serve-metrics-host needs --serve-metrics-port")
    return OwnMetrics(port=port, host=host)


def otlp_from_args(ns: argparse.Namespace) -> dict[str, Any]:
    """The `EngineOptions` fields of ``--otlp-endpoint``, checked before any load: an http(s) URL without
    credentials, and the OpenTelemetry exporter importable; the run's trace key drawn here."""
    endpoint: str | None = ns.otlp_endpoint
    if endpoint is None:
        return {}
    if not endpoint.startswith(("http://", "https://")):
        raise UsageError(f"--otlp-endpoint must start with http:// or https://: {endpoint!r}")
    if not _otel_installed():
        raise UsageError("--otlp-endpoint needs the OpenTelemetry packages: pip install 'tokentop[otel]'")
    return {"otlp_endpoint": endpoint.rstrip("/"), "trace_key": secrets.token_hex(8)}


def _otel_installed() -> bool:
    """The SDK and its OTLP/HTTP exporter are installed (``tokentop[otel]``): found, not imported."""
    try:
        return all(
            importlib.util.find_spec(name) is not None
            for name in ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http")
        )
    except ModuleNotFoundError:  # a parent package is missing
        return False
