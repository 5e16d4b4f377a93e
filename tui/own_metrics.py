"""tokentop's own ``/metrics`` around a face's run, for the live app, bench and watch alike: bound first (a
busy port is one line, before any load), fed the engine's snapshots once it exists, closed however the
run ends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tui.configs import OwnMetrics, UsageError

if TYPE_CHECKING:
    from tui.engine.api import Engine
    from tui.engine.server_metrics.view import CanaryFigures
    from tui.engine.telemetry.endpoint import MetricsEndpoint


@contextlib.contextmanager
def serving_metrics(config: OwnMetrics) -> Iterator[MetricsEndpoint | None]:
    """The endpoint ``config`` asks for (None when it asks for none); `UsageError` when it cannot be bound."""
    if config.port is None:
        yield None
        return
    # lazy: prometheus_client and a WSGI server, ~25 ms of a face's start, only for --metrics-port
    from tui.engine.telemetry.endpoint import MetricsEndpoint, MetricsEndpointError

    try:
        endpoint = MetricsEndpoint(config.host, config.port)
    except MetricsEndpointError as exc:
        raise UsageError(str(exc)) from None
    try:
        yield endpoint
    finally:
        endpoint.close()


def serve_engine(metrics: MetricsEndpoint | None, engine: Engine, *, load: bool = True) -> None:
    """Serve ``engine``'s snapshots and its canary user's figures on ``metrics`` (if any); not ``load``: an
    engine that sends none (`tokentop watch`)."""
    if metrics is None:
        return

    def canary() -> CanaryFigures | None:
        view = engine.server_view()
        return view.canary if view is not None else None

    metrics.serve(engine.snapshot, canary=canary, load=load)
