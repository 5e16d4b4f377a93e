"""tokentop's own ``/metrics`` endpoint: prometheus_client's WSGI app on a thread of the face process, bound
before the engine starts (a busy port is one line before any load), fed by the engine once it exists."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from tui.engine.server_metrics.view import CanaryFigures
from tui.engine.snapshot import Snapshot
from tui.engine.telemetry.prometheus import SnapshotCollector

POLL_S = 0.05
"""How often the server's loop looks for `close`: prometheus_client's own `start_http_server` polls every
0.5 s, which every run would wait out at its end."""


class MetricsEndpointError(Exception):
    """The endpoint cannot be served (the port is taken, the host is not this machine's): one line."""


class _Quiet(WSGIRequestHandler):
    """No line per scrape on stderr (the app draws there)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class MetricsEndpoint:
    """A running ``/metrics`` server; `serve` gives it the engine's snapshots, `close` stops it."""

    def __init__(self, host: str, port: int) -> None:
        """Bind and serve at once (port 0: any free port, see `port`); `MetricsEndpointError` if it cannot."""
        self._collector = SnapshotCollector()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self._collector)
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
            server_class = type("Server", (ThreadingWSGIServer,), {"address_family": family})
            self._server: WSGIServer = make_server(host, port, make_wsgi_app(registry), server_class, _Quiet)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise MetricsEndpointError(
                f"cannot serve tokentop's metrics on {host}:{port}: {reason}"
            ) from None
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(POLL_S,), name="tokentop-metrics", daemon=True
        )
        self._thread.start()
        self.host = host
        self.port: int = self._server.server_port
        """The port bound (the one asked for, or the free one port 0 found)."""

    def serve(
        self,
        snapshot: Callable[[], Snapshot],
        *,
        canary: Callable[[], CanaryFigures | None] | None = None,
        load: bool = True,
    ) -> None:
        """From now on each scrape reads ``snapshot()``: the engine's, safe to call from another thread;
        ``canary()``, the canary user's live figures (None: no canary); not ``load``: the engine sends none
        (`tokentop watch`), so no load or client figures are served."""
        self._collector.canary = canary
        self._collector.load = load
        self._collector.source = snapshot

    def close(self) -> None:
        """Stop serving and free the port. Idempotent."""
        self._collector.source = None
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=2.0)
        self._server.server_close()
