"""The `?` screen: every key, and what every number means."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.markdown import Markdown
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.engine.server_metrics.kinds import SIGNAL_DOCS
from tui.engine.snapshot import ITL_NAMES, ClientHealth

KEYS: tuple[tuple[str, str], ...] = (
    (
        "`+` `-` (or `up` `down`)",
        "one user more / fewer; in rate mode one rate step (0.5/s below 5/s, else ~10%)",
    ),
    ("`]` `[`", "double / halve the users or the rate"),
    (
        "`m`",
        "switch closed loop (concurrency) ⇄ open loop (rate); rate mode starts at the req/s measured now",
    ),
    ("`space`", "pause / resume the load (in-flight requests finish)"),
    (
        "`a`",
        "auto ramp 1, 2, 4, … users (req/s in rate mode), each held until steady; stops at the knee, "
        "a broken "
        "`--slo-ttft-ms` / `--slo-tpot-ms` p99, more than 5% failed, or 1024; `a` again stops it. Why it "
        "stopped stays in the status bar and under the curve until the next load change",
    ),
    (
        "`k`",
        "set the load back to the knee: the auto ramp's (after a broken SLO or errors, its last level that "
        "passed), else the knee measured so far",
    ),
    ("`i`", "next ITL convention (histogram and table)"),
    ("`w`", "next window for the histograms: 10 s, 30 s, 60 s, whole run"),
    ("`v`", "next view, when the terminal is too small to show every pane"),
    ("`b`", "add a mark with a short label to the recorded session (a replay seeks to it with `n`)"),
    ("`p`", "freeze / unfreeze the token text"),
    ("`tab`, `up` `down`, `enter`", "pick a lane, open its request (chunk timeline, TTFT, ITL, error)"),
    ("`s`", "save results JSON, its CSV, vLLM files and plot, the requests log and a screenshot here"),
    ("`t`", "next theme (files in the themes folder; `--theme` takes a name or a path)"),
    ("`ctrl+p`", "command palette: every action by name"),
    ("`?`", "this help"),
    ("`q`", "quit: cancels in-flight requests, writes `--output` if given"),
)
KEYS_MD = "| key | does |\n|---|---|\n" + "".join(f"| {key} | {does} |\n" for key, does in KEYS)

METRICS_MD = (
    f"""\
## What the numbers mean

All times are measured at the client socket: a stamp just before the request is sent, and one as each
streamed event is decoded. Latencies are in milliseconds unless marked `s`.

- **ISL / OSL**: input and output sequence length, in tokens. Taken from the server's `usage` when it
  reports one (the request asks for it), otherwise counted as one token per content chunk, otherwise
  estimated from the text. A request's detail shows which source was used. Prompts are sized to `--isl`
  by the server's own count (a probe before the run, then every answer's `usage`); the level table's
  **ISL/OSL** column is each level's achieved mean, and a notice says when it is more than 2 tokens off.
- **TTFT** (time to first token): from sending the request to the first content (or reasoning) token.
  **TTFA** (time to first answer token) waits for the first content token, after any reasoning: equal to
  TTFT for a model that does not reason.
  It includes the network, the server's queueing and the prefill. **Scheduling lag**, how late the client
  sent a request compared with when it was due (an open-loop arrival, or a busy client), is measured
  separately and is not part of TTFT.
- **E2E** (end-to-end latency): from sending the request to its last token.
- **ITL** (inter-token latency) comes in three conventions that tools disagree on; `i` switches:
  - `chunk`: {ITL_NAMES["chunk"]}. The gap between consecutive content chunks; a server that sends
    several tokens per chunk shows fewer, longer gaps.
  - `tpot`: {ITL_NAMES["tpot"]}. Time per output token after the first: (E2E − TTFT) / (OSL − 1).
  - `e2e`: {ITL_NAMES["e2e"]}. E2E / OSL, so TTFT is spread over the tokens.
- **TPOT**: the `tpot` convention above, one value per request.
- **TPS** (tokens per second): **output tok/s** is every request's output tokens per second of wall time,
  the server's throughput: the gauge uses the last few seconds, the curve and table each level's steady
  window. **tok/s/req** is one request's decode speed after its first token, (OSL − 1) / (E2E − TTFT) =
  1000 / TPOT, the median over requests: what one user sees.
- **req/s**: completed requests per second.
- **Load level**: a stretch of the run at one target (users or req/s). Each request belongs to the level
  it started under; a level's steady window leaves out the transient after the change.
- **Knee**: the level after which adding load stops buying throughput (`◆` in the table, a line on the
  curve).
- **In flight / done / failed**: requests sent and not finished; finished with all tokens; ended in error.
- **ui ms/tick, ms/frame, fps** (status line): the app's own work per refresh tick (reading the snapshot,
  updating the panes, building at most one plot), the same until Textual has drawn it (medians), and
  ticks per second. If these grow, the UI is slow, not the server.

### The server pane (the server's own view)

Scraped from the server's Prometheus `/metrics` once a second (`--metrics-url` to point elsewhere,
`--no-server-metrics` to switch off), on its own thread: it never slows the load or the screen. Each figure
has one meaning across vLLM, SGLang, llama.cpp and TGI; a server that does not export one shows `-`,
never 0. Rates and quantiles cover the last 10 s; sparklines the last 2 minutes.
"""
    + "".join(f"\n- **{name}**: {doc}" for name, doc in SIGNAL_DOCS.items())
    + """

**client − server** TTFT: the client's median TTFT minus the server's over the same 10 s: network, HTTP
and the client's own cost, a figure no other load tool shows. The server's quantiles are interpolated
inside its histogram buckets (as Prometheus does), so they are coarser than the client's.
"""
)


INTRO_MD = """\
# tokentop help

Scroll with `up` `down`, `pgup` `pgdn`, `space`, `home` `end`; `esc`, `q` or `?` closes.
Below: **Client health** (is the load generator keeping up), **Keys**, then **What the numbers mean**,
the metric definitions (`d` jumps there).
"""


def health_md(health: ClientHealth | None) -> str:
    """The Client health section for the current snapshot's `ClientHealth` (None: no snapshot yet)."""
    head = "## Client health\n\n"
    if health is None:
        return head + "No measurement yet.\n"
    figures = (
        f"{health.workers} worker{'s' if health.workers != 1 else ''}, highest event-loop lag p99 "
        f"{health.loop_lag_p99_ms:.1f} ms, highest CPU share {health.cpu_share:.0%} of a core "
        "(over the last few seconds)."
    )
    if health.saturated:
        reason = health.reason or "the load generator cannot keep up"
        state = (
            f"**⚠ saturated** (the status bar's badge): {reason}.\n\nTimings measured while this lasts "
            "may be late: distrust them; results mark the spans (`client.saturated_spans_s`)."
        )
    elif health.reason:
        state = f"Not saturated, but: {health.reason}."
    else:
        state = "OK: the load generator keeps up, so the timings are the server's."
    return f"{head}{state}\n\n{figures}\n"


class HelpBody(VerticalScroll):
    """The help's scroll area, focused on open so the usual keys scroll it at once."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "page_down", "page down", show=False),
        Binding("shift+space", "page_up", "page up", show=False),
    ]


class MarkdownText(Static):
    """Markdown drawn by Rich in one widget. Textual's `Markdown` widget mounts a widget per block (every
    table row, every list item): for this help that took 2 s to open on a busy 2-core machine, ~4x longer
    than this, and the help is read, not clicked."""

    def __init__(self, source: str, *, id: str) -> None:
        super().__init__(Markdown(source), id=id)
        self.source = source

    def update_source(self, source: str) -> None:
        self.source = source
        self.update(Markdown(source))


class HelpScreen(ModalScreen[None]):
    """Client health, keys and metric definitions; any of escape, q, ? closes it."""

    AUTO_FOCUS = "#help-body"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "close"),
        Binding("d", "definitions", "metric definitions", show=False),
    ]
    HEALTH_EVERY_S = 1.0
    """How often the Client health section looks at the newest snapshot."""

    def __init__(self, health: Callable[[], ClientHealth | None] = lambda: None) -> None:
        super().__init__()
        self._health = health
        self._health_md = health_md(health())

    def compose(self) -> ComposeResult:
        with HelpBody(id="help-body"):
            yield MarkdownText(INTRO_MD, id="help-intro")
            yield MarkdownText(self._health_md, id="help-health")
            yield MarkdownText("## Keys\n\n" + KEYS_MD, id="help-keys")
            yield MarkdownText(METRICS_MD, id="help-metrics")

    def on_mount(self) -> None:
        self.set_interval(self.HEALTH_EVERY_S, self._refresh_health)

    def on_screen_resume(self) -> None:
        """Shown again (the app keeps one help screen): the newest health, from the top."""
        self._refresh_health()
        self.query_one(HelpBody).scroll_home(animate=False)

    def _refresh_health(self) -> None:
        if not self.is_current:
            return  # installed but not shown: nothing to redraw
        text = health_md(self._health())
        if text != self._health_md:
            self._health_md = text
            self.query_one("#help-health", MarkdownText).update_source(text)

    def action_definitions(self) -> None:
        body = self.query_one(HelpBody)
        body.scroll_to_widget(self.query_one("#help-metrics"), animate=False, top=True)
