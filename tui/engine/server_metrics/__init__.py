"""The server's own view: its Prometheus `/metrics`, scraped beside the load.

Runs in the face process only, never in an engine worker (an import contract keeps `tui.engine.stream` and
`tui.engine.load` from importing it, and it imports neither).

- `parse`: Prometheus text -> families (prometheus_client's parser), values summed over label sets.
- `kinds`: the server kind by metric prefix, and the table of where each common signal comes from.
- `window`: counter rates (reset-aware), windowed histogram quantiles from bucket deltas, time-weighted
  gauge means.
- `view`: one scrape reduced to a `Reading`; the frozen `ServerView` a face reads, with `level_summary`.
- `level_figures`: each level's figures, kept once the level has settled, so they outlive the ring.
- `poller`: `ServerMetricsPoller`, the background thread that scrapes and publishes.
"""

from __future__ import annotations

from tui.engine.server_metrics.poller import ServerMetricsPoller, metrics_url_for
from tui.engine.server_metrics.view import ServerView

__all__ = ["ServerMetricsPoller", "ServerView", "metrics_url_for"]
