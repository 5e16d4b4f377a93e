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

from tui import manual
from tui.engine.snapshot import ClientHealth


def _manual_text(topic: str) -> str:
    found = manual.page(topic)
    return found.text if found is not None else f"(the manual has no page {topic!r})\n"


KEYS_MD = _manual_text("keys").split("\n\n", 2)[2]
"""The keys page without its title and lead paragraph: the table and how the help itself is read."""

METRICS_MD = _manual_text("numbers")
"""The manual's definitions page, as `tokentop help numbers` prints it."""

INTRO_MD = """\
# tokentop help

Scroll with `up` `down`, `pgup` `pgdn`, `space`, `home` `end`; `esc`, `q` or `?` closes.
Below: **Client health** (is the load generator keeping up), **Keys**, then a page of the manual: the
metric definitions first (`d` jumps there), `n` and `b` turn to the next and previous page
(`tokentop help` lists the same pages in a shell).
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
        Binding("n", "turn(1)", "next manual page", show=False),
        Binding("b", "turn(-1)", "previous manual page", show=False),
    ]
    HEALTH_EVERY_S = 1.0
    """How often the Client health section looks at the newest snapshot."""

    def __init__(self, health: Callable[[], ClientHealth | None] = lambda: None) -> None:
        super().__init__()
        self._health = health
        self._health_md = health_md(health())
        self._topics = [p.topic for p in manual.pages() if p.topic != "keys"]
        self._topic = "numbers"

    def compose(self) -> ComposeResult:
        with HelpBody(id="help-body"):
            yield MarkdownText(INTRO_MD, id="help-intro")
            yield MarkdownText(self._health_md, id="help-health")
            yield MarkdownText("## Keys\n\n" + KEYS_MD, id="help-keys")
            yield MarkdownText(METRICS_MD, id="help-metrics")

    def action_turn(self, step: int) -> None:
        """Show the next (or previous) page of the manual in place of the current one."""
        at = self._topics.index(self._topic) if self._topic in self._topics else 0
        self._topic = self._topics[(at + step) % len(self._topics)]
        page = self.query_one("#help-metrics", MarkdownText)
        page.update_source(_manual_text(self._topic))
        self.query_one(HelpBody).scroll_to_widget(page, animate=False, top=True)

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
        if self._topic != "numbers":
            self._topic = "numbers"
            self.query_one("#help-metrics", MarkdownText).update_source(METRICS_MD)
        body = self.query_one(HelpBody)
        body.scroll_to_widget(self.query_one("#help-metrics"), animate=False, top=True)
