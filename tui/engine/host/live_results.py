"""The results document of a running (or just stopped) engine: the plain data `build_results` wants, taken
from the live `Store` in one go, so the per-level statistics, histograms and server figures all count the
same requests. `tui.engine.host.results` builds the document; this only gathers its inputs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tui.engine.aggregate.level_histograms import level_histograms
from tui.engine.aggregate.store import Store
from tui.engine.host.results import ClientSummary, RunInfo, build_results, server_summary
from tui.engine.server_metrics.level_figures import level_spans_ns
from tui.engine.snapshot import Snapshot

if TYPE_CHECKING:
    from tui.engine.host.server_scrape import ServerScrape


def collect_results(
    store: Store,
    snapshot: Callable[[], Snapshot],
    info: RunInfo,
    scrape: ServerScrape,
    *,
    interrupted: str | None,
    now_ns: int | None = None,
) -> dict[str, Any]:
    """Called under the engine's lock. The level views are forced fresh before ``snapshot`` is taken, so
    the snapshot shows them; ``interrupted`` says why the run was cut short, None when it finished.
    ``now_ns``: the engine's clock (a replay's recorded time), else now."""
    now = time.perf_counter_ns() if now_ns is None else now_ns
    views = store.level_views(now, force=True)
    snap = snapshot()
    client = ClientSummary(
        max_loop_lag_p99_ms=store.max_lag_ms,
        max_cpu_share=store.max_cpu,
        saturated=store.saturated_ever,
        saturated_spans_s=tuple((span[0], span[1]) for span in store.saturated_spans),
        notices=tuple(store.notices),
    )
    view = scrape.latest()
    if view is None:
        server = None
    else:
        spans = level_spans_ns([lv for lv, _ in views], store.t0_ns, now)
        server = server_summary(view, scrape.level_summaries(view, spans))
    histograms = {
        lv.level_id: level_histograms(store.levels[lv.level_id], lv, store.t0_ns) for lv, _ in views
    }
    return build_results(
        info, snap, views, client, interrupted=interrupted, server=server, histograms=histograms
    )
