"""The server's own view beside the client's: queue, batch, KV cache and its latency, from its `/metrics`.

Why TTFT grows shows here: requests waiting for a slot or KV room, a batch that stopped growing, a KV cache
near full, preemptions, and the client's TTFT in parts over the same 10 s (queue, prefill, what is left of
the server's, and the network and client), the canary user's TTFT, the GPU beside the server. A server
quantile is shown as its bucket allows (a bound or a range, `tui.engine.server_metrics.window.Estimate`);
a server restart is a badge on the border.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from textual.content import Content
from textual.widgets import Static

from tui import units
from tui.engine.server_metrics.gpu import GPU_SIGNALS, gpu_ids
from tui.engine.server_metrics.view import MISSING, OK, STARTING, UNREACHABLE, CanaryFigures, ServerView
from tui.engine.server_metrics.window import ABOVE, BOUND, EXACT, RANGE, Estimate
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


def format_estimate(est: Estimate | None) -> str:
    """A quantile from buckets as it may be read: a number for a narrow bucket, `< 300ms` for the first
    bucket, `100ms-250ms` for a bucket wider than the window's mean, `> 80s` for the +Inf bucket."""
    if est is None:
        return "-"
    ms = est.scaled(1e3)
    if ms.kind == BOUND:
        return f"<{units.ms_label(ms.high)}"
    if ms.kind == RANGE:
        return f"{units.ms_label(ms.low)}–{units.ms_label(ms.high)}"
    if ms.kind == ABOVE:
        return f">{units.ms_label(ms.low)}"
    return units.ms_label(ms.value)


def parts_line(parts: Mapping[str, Any] | None, client_ms: float | None, wide: bool) -> str | None:
    """`TTFT 900ms = queue 640 + prefill 210 + net/client 50`: the means of the last window; a part the
    server does not export is `?`; None when the server exports none."""
    if parts is None:
        return None
    whole = parts.get("server_ttft_ms")
    if whole is None and parts.get("queue_ms") is not None and parts.get("prefill_ms") is not None:
        whole = parts["queue_ms"] + parts["prefill_ms"]
    if whole is None and parts.get("queue_ms") is None and parts.get("prefill_ms") is None:
        return None  # no request reached its first token in the window
    total = client_ms if client_ms is not None else whole
    missing = set(parts.get("missing", ()))

    def ms(key: str) -> str:
        value = parts.get(key)
        return "?" if key in missing else "-" if value is None else f"{value:,.0f}"

    # no part below 0 (`~0`): over this live window the parts' populations differ (`parts.with_client`)
    terms = [f"queue {ms('queue_ms')}", f"prefill {ms('prefill_ms')}"]
    other = parts.get("server_other_ms")
    if other is not None and abs(other) >= 1:
        terms.append(f"{'server other' if wide else 'srv'} {f'{other:,.0f}' if other > 0 else '~0'}")
    if client_ms is not None and whole is not None:
        net = client_ms - whole
        terms.append(f"{'network/client' if wide else 'net'} {f'{net:,.0f}' if net > -0.5 else '~0'}")
    head = f"TTFT {'-' if total is None else f'{total:,.0f}'}ms ="
    return f"{head} {' + '.join(terms)}" if wide else f"{head}\n  {' + '.join(terms)}"


def gpu_line(gauges: Mapping[str, float]) -> str | None:
    """`GPU×4 93% SM 12% DRAM 95% FB 90% 1,800W` (GPU: its utilisation): the latest reading, all GPUs;
    None without GPU."""
    if not any(s in gauges for s in GPU_SIGNALS):
        return None
    n = len(gpu_ids(gauges))
    out = [f"GPU×{n}" if n > 1 else "GPU"]
    if "gpu_util" in gauges:
        out[0] += f" {gauges['gpu_util']:.0%}"
    for signal, label in (("sm_active", "SM"), ("dram_active", "DRAM")):
        if signal in gauges:
            out.append(f"{label} {gauges[signal]:.0%}")
    used, free = gauges.get("fb_used_mib"), gauges.get("fb_free_mib")
    if used is not None and free is not None and used + free > 0:
        out.append(f"FB {used / (used + free):.0%}")
    if "power_w" in gauges:
        watts = gauges["power_w"]
        out.append(f"{watts / 1e3:.1f}kW" if watts >= 1000 else f"{watts:.0f}W")
    return " ".join(out)


def canary_line(canary: CanaryFigures | None) -> str | None:
    """`canary 120ms p99 310ms (1/s)`: the TTFT a new user sees now; None without a canary."""
    if canary is None:
        return None
    if not canary.n:
        return f"canary waiting ({canary.rate:g}/s)" + (f", {canary.errors} failed" if canary.errors else "")
    mean = units.ms_label(canary.mean_ms) if canary.mean_ms is not None else "-"
    p99 = units.ms_label(canary.p99_ms) if canary.p99_ms is not None else "-"
    errors = f" {canary.errors} failed" if canary.errors else ""
    return f"canary {mean} p99 {p99} ({canary.rate:g}/s){errors}"


def reset_badge(view: ServerView, now_ns: int | None = None) -> str | None:
    """`⟲ restarted 12s ago`: the server's counters went back (rates and levels span it); None otherwise."""
    if not view.resets or view.reset_t_ns is None:
        return None
    last = view.readings[-1].t_ns if view.readings else view.reset_t_ns
    ago_s = max(0.0, ((now_ns if now_ns is not None else last) - view.reset_t_ns) / 1e9)
    times = f" ×{view.resets}" if view.resets > 1 else ""
    return f"⟲ restarted{times} {ago_s:.0f}s ago"


def server_content(
    view: ServerView | None, snap: Snapshot | None, spark_width: int = 16, width: int = 38
) -> Content:
    """Pure: the pane's text for one server view (and the client's TTFT from the snapshot), for a pane
    ``width`` cells wide inside its border."""
    if view is None:
        return Content.styled("server metrics off (--no-server-metrics)", "$text-muted")
    if view.status == STARTING:
        return Content.styled(f"scraping {view.url} …", "$text-muted")
    if view.status in (MISSING, UNREACHABLE) and not view.readings:
        message = Content.styled(view.message or f"no metrics at {view.url}", "$text-warning")
        line = canary_line(view.canary)
        return message if line is None else Content.assemble(message, "\n", (line, "$accent"))
    cur = view.current
    parts: list[str | tuple[str, str]] = []
    wide = width >= 60

    def row(label: str, value: str, signal: str | None = None) -> None:
        parts.extend([(f"{label:<9}", "$text-muted"), (f"{value:>6}", "bold")])
        if signal is not None:
            points = view.history(signal, HISTORY_S)
            parts.extend(["  ", (sparkline([v for _, v in points], spark_width), "$accent")])
        parts.append("\n")

    if view.slots is not None:
        row("slots", f"{view.slots.busy}/{view.slots.total}")
    row("running", _num(cur.get("running")), "running")
    row("waiting", _num(cur.get("waiting")), "waiting")
    row("KV cache", _pct(cur.get("kv_usage")), "kv_usage")
    gen = cur.get("generation_tok_s")
    rates = [
        f"gen {units.rate(gen, 0) if gen is not None else '-'} tok/s",
        f"{'preempt' if wide else 'pre'} {_num(cur.get('preemptions_per_s'), '{:,.1f}')}/s",
        f"{'prefix hit' if wide else 'hit'} {_pct(cur.get('prefix_cache_hit_rate'))}",
    ]
    if cur.get("spec_acceptance") is not None:
        rates.append(f"spec {_pct(cur.get('spec_acceptance'))}")
    parts.append(("  ".join(rates) + "\n", ""))
    client = snap.ttft_hist.get(CLIENT_WINDOW_S) if snap is not None else None
    # the load's TTFT only: the canary's requests are a different population from the server's histograms
    client_ms = client.stats.mean if client is not None and client.stats.n else None
    if (line := parts_line(view.parts, client_ms, wide)) is not None:
        parts.append((line + "\n", "bold"))
    elif client_ms is not None:
        parts.append(f"TTFT {units.ms_label(client_ms)} (client; no parts from the server)\n")
    if (line := canary_line(view.canary)) is not None:
        parts.append((line + "\n", "$accent"))
    if view.readings and (line := gpu_line(view.readings[-1].gauges)) is not None:
        parts.append(line + "\n")
    for signal, label in (("ttft_s", "srv TTFT"), ("queue_s", "queue"), ("itl_s", "ITL")):
        est = view.estimates.get(signal, {})
        if est.get("p50") is not None:
            p50, p99 = format_estimate(est.get("p50")), format_estimate(est.get("p99"))
            parts.extend([(f"{label:<9}", "$text-muted"), f"p50 {p50}  p99 {p99}\n"])
    if any(e.kind != EXACT for q in view.estimates.values() for e in q.values()):
        parts.append(("<, – : estimate from buckets\n", "$text-muted"))
    if view.stale_s is not None:
        parts.append((f"late: /metrics slow, figures up to {view.stale_s:.1f} s old ({view.late} late)\n",
                      "$text-warning"))  # fmt: skip
    if view.status != OK and view.message:
        parts.append((view.message, "$text-warning"))
    return Content.assemble(*parts).rstrip("\n")


class ServerPane(Static):
    """The server's own signals (`ServerView`), redrawn when a new scrape was published."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: object = None
        self.side = ""
        """Which endpoint's server is shown, "A" or "B", with ``--ab`` ("" with one)."""

    def show(self, view: ServerView | None, snap: Snapshot | None) -> None:
        """Redraw if the view or the client's TTFT changed (a scrape a second: cheap)."""
        client = snap.ttft_hist.get(CLIENT_WINDOW_S) if snap is not None else None
        canary = view.canary if view else None
        # not the view's id: a view with the canary's figures is a new object on every read
        key = (
            (view.scrapes, view.failures, view.status, view.url) if view else None,
            client,
            canary,
            self.content_region.width,
            self.side,
        )
        if key == self._key:
            return
        self._key = key
        inner = self.content_region.width or 38
        self.update(server_content(view, snap, spark_width=min(max(8, inner - 18), 40), width=inner))
        server = f"server {self.side}" if self.side else "server"
        if view is None:
            self.border_title = server
            self.border_subtitle = ""
        else:
            model = f" · {view.model}" if view.model else ""
            self.border_title = f"{server} · {view.kind}{model}"
            self.border_subtitle = reset_badge(view) or ""
