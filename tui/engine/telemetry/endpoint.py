"""tokentop's own ``/metrics`` endpoint: prometheus_client's HTTP server on a thread of the face process,
bound before the engine starts (a busy port is one line before any load), fed by the engine once it exists."""

from __future__ import annotations

import threading
from collections.abc import Callable
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from tui.engine.snapshot import Snapshot
from tui.engine.telemetry.prometheus import SnapshotCollector


class MetricsEndpointError(Exception):
    """The endpoint cannot be served (the port is taken, the host is not this machine's): one line."""


class MetricsEndpoint:
    """A running ``/metrics`` server; `serve` gives it the engine's snapshots, `close` stops it."""

    def __init__(self, host: str, port: int) -> None:
        """Bind and serve at once (port 0: any free port, see `port`); `MetricsEndpointError` if it cannot."""
        self._collector = SnapshotCollector()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self._collector)
        try:
            self._server: WSGIServer
            self._thread: threading.Thread
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise MetricsEndpointError(
                f"cannot serve tokentop's metrics on {host}:{port}: {reason}"
            ) from None
        self.host = host
        self.port: int = self._server.server_port
        """The port bound (the one asked for, or the free one port 0 found)."""

    def serve(self, snapshot: Callable[[], Snapshot]) -> None:
        """From now on each scrape reads ``snapshot()``: the engine's, safe to call from another thread."""
        self._collector.source = snapshot

    def close(self) -> None:
        """Stop serving and free the port. Idempotent."""
        self._collector.source = None
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2.0)
