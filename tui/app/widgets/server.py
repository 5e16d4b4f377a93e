"""The server's own view beside the client's: queue, batch, KV cache and its latency, from its `/metrics`.

Why TTFT grows shows here: requests waiting for a slot or KV room, a batch that stopped growing, a KV cache
near full, preemptions. The server's TTFT is set beside the client's over the same 10 s, and their
difference (network, HTTP and client cost) is a figure of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.content import Content
from textual.widgets import Static

from tui.app.plotting import format_ms, format_rate
from tui.engine.server_metrics.view import MISSING, OK, STARTING, UNREACHABLE, ServerView
from tui.engine.snapshot import Snapshot

SPARK = "▁▂▃▄▅▆▇█"
HISTORY_S = 120.0
"""The sparklines show this many seconds of readings (one per scrape)."""
CLIENT_WINDOW_S = 10.0
"""The client's TTFT is read over the same window as the server's quantiles (`ServerView.window_s`)."""


def sparkline(values: Sequence[float], width: int) -> str:
    """The last ``width`` values as block characters, scaled from 0 to their maximum (blank when empty)."""
    tail = list(values)[-width:]
    if not tail:
        return ""
    top = max(tail)
    if top <= 0:
        return SPARK[0] * len(tail)
    return "".join(SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1) + 0.5))] for v in tail)


def _num(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def server_content(view: ServerView | None, snap: Snapshot | None, spark_width: int = 16) -> Content:
    """Pure: the pane's text for one server view (and the client's TTFT from the snapshot)."""
    if view is None:
        return Content.styled("server metrics off (--no-server-metrics)", "$text-muted")
    if view.status == STARTING:
        return Content.styled(f"scraping {view.url} …", "$text-muted")
    if view.status in (MISSING, UNREACHABLE) and not view.readings:
        return Content.styled(view.message or f"no metrics at {view.url}", "$text-warning")
    cur = view.current
    parts: list[str | tuple[str, str]] = []

    def row(label: str, value: str, signal: str | None = None) -> None:
        parts.extend([(f"{label:<12}", "$text-muted"), (f"{value:>7}", "bold")])
        if signal is not None:
            points = view.history(signal, HISTORY_S)
            parts.extend(["  ", (sparkline([v for _, v in points], spark_width), "$accent")])
        parts.append("\n")

    if view.slots is not None:
        row("slots busy", f"{view.slots.busy}/{view.slots.total}")
    row("running", _num(cur.get("running")), "running")
    row("waiting", _num(cur.get("waiting")), "waiting")
    row("KV cache", _pct(cur.get("kv_usage")), "kv_usage")
    row("preempt/s", _num(cur.get("preemptions_per_s"), "{:,.1f}"))
    gen = cur.get("generation_tok_s")
    row("gen tok/s", format_rate(gen, 0) if gen is not None else "-")
    row("prefix hit", _pct(cur.get("prefix_cache_hit_rate")))
    if cur.get("spec_acceptance") is not None:
        row("spec accept", _pct(cur.get("spec_acceptance")))
    server_ttft = view.quantiles.get("ttft_s", {})
    client = snap.ttft_hist.get(CLIENT_WINDOW_S) if snap is not None else None
    s50, s99 = server_ttft.get("p50"), server_ttft.get("p99")
    if s50 is not None or client is not None:
        parts.append(("TTFT p50/p99 (last 10 s)\n", "$text-muted"))
        if s50 is not None:
            parts.append(f"  server {format_ms(s50 * 1e3)} / {format_ms((s99 or s50) * 1e3)}\n")
        if client is not None and client.stats.n:
            c50, c99 = client.stats.p50, client.stats.p99
            parts.append(f"  client {format_ms(c50)} / {format_ms(c99)}\n")
            if s50 is not None:
                parts.extend(
                    [("  client − server ", "$text-muted"), (f"{format_ms(c50 - s50 * 1e3)}\n", "bold")]
                )
    for signal, label in (("queue_s", "queue"), ("itl_s", "ITL (chunk)")):
        q = view.quantiles.get(signal, {})
        if q.get("p50") is not None:
            p50, p99 = q["p50"] or 0.0, q.get("p99") or q["p50"] or 0.0
            parts.extend(
                [(f"{label:<12}", "$text-muted"), f"{format_ms(p50 * 1e3)} / {format_ms(p99 * 1e3)}\n"]
            )
    if view.status != OK and view.message:
        parts.append((view.message, "$text-warning"))
    return Content.assemble(*parts).rstrip("\n")


class ServerPane(Static):
    """The server's own signals (`ServerView`), redrawn when a new scrape was published."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: object = None

    def show(self, view: ServerView | None, snap: Snapshot | None) -> None:
        """Redraw if the view or the client's TTFT changed (a scrape a second: cheap)."""
        client = snap.ttft_hist.get(CLIENT_WINDOW_S) if snap is not None else None
        key = (id(view), view.scrapes if view else None, view.status if view else None, client)
        if key == self._key:
            return
        self._key = key
        width = max(8, self.content_region.width - 20) if self.content_region.width else 16
        self.update(server_content(view, snap, spark_width=min(width, 40)))
        if view is None:
            self.border_title = "server"
        else:
            model = f" · {view.model}" if view.model else ""
            self.border_title = f"server · {view.kind}{model}"
