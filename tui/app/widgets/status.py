"""The status lines at the top: where the load goes, what it is, and how the run is going."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.style import Style
from rich.text import Text
from textual.content import Content
from textual.widgets import Static

from tui import units
from tui.app.widgets.styles import ComponentStyles
from tui.app.widgets.text_lines import Span, SpanLines, TextLines, spans_to_text
from tui.engine.config import API_PATHS, LoadTarget
from tui.engine.snapshot import Snapshot


@dataclass(frozen=True)
class UiState:
    """App-side facts the status line shows next to the snapshot."""

    target: LoadTarget
    ramp: str = ""
    """Auto-ramp progress, or its result until the next load change; empty otherwise."""
    frozen: bool = False
    frames: str = ""
    probing: bool = False
    """The engine has not started its workers yet: it is still asking the server for /models."""
    watching: bool = False
    """`tokentop watch`: no load is sent, so the line says so instead of a target."""
    canary_rate: float | None = None
    """The canary user's rate when one runs (in `watch`, the only load sent)."""
    stopped_at_s: float | None = None
    """The run time of the first snapshot that said the engine stopped: the clock stays there, as the
    line says "■ stopped" (a clock that counted on after a 401 halt would say the run goes on)."""
    b_where: tuple[str, str] | None = None
    """``--ab``: B's URL and model, named beside A's."""
    turn: str = ""
    """``--ab-mode alternate``: which side the load is on now ("A" or "B"; "" while neither)."""


StyleFor = Callable[[str], Style]
"""Maps a status part ("muted", "load", "failed", ...) to its style: the `status--<part>` component."""


SATURATED_BADGE = "⚠ client saturated: see ?"
"""One row in the status bar; the reason, often two lines long, is in the help screen's Client health."""
BACK_SHOWN_S = 30.0
"""How long after an outage the status bar still says when the server came back."""


def status_lines(snap: Snapshot, ui: UiState, style: StyleFor, width: int | None = None) -> SpanLines:
    """Pure: the status lines for a snapshot (the widget only displays them). Three lines fit 80 columns:
    where, the load and its requests, the throughput and the app's own health. Given a ``width``, the
    third line keeps to one row: notes (saturation badge, ramp, frozen text) come before the app's frame
    costs, which are left out first, and what still does not fit ends in "…"."""
    gap = ("   ", None)
    muted = style("muted")
    where: list[Span] = [
        (snap.base_url, style("url")),
        (" · ", muted),
        (snap.model or "(model?)", style("model")),
        (" · ", muted),
        (snap.endpoint, muted),
    ]
    if ui.b_where is not None:  # A/B: each endpoint named by its side
        where = [("A ", muted), *where, gap, ("B ", muted), (ui.b_where[0], style("url")), (" · ", muted),
                 (ui.b_where[1] or "(model?)", style("model"))]  # fmt: skip
    if snap.demo:
        where += [("  ", None), ("demo: built-in simulator", style("demo"))]
    target = ui.target
    load: list[Span] = [(target.label(), style("load")), (" ", None)]
    if ui.watching:
        said = (
            f"watching: only a canary user sent ({ui.canary_rate:g}/s), and the server's own /metrics"
            if ui.canary_rate
            else "watching: no load sent, the server's own /metrics only"
        )
        load = [(said, style("running"))]
    elif snap.fatal:  # the banner says why; "running" under it would say the opposite
        load.append(("■ stopped", style("failed")))
    elif target.paused:
        load.append(("⏸ paused", style("paused")))
    elif ui.probing:
        load.append((f"probing {snap.base_url}/models…", style("probing")))
    elif snap.outages and snap.outages[-1].end_s is None:
        down_at = units.elapsed(snap.outages[-1].start_s)
        load.append((f"⚠ the server stopped answering at {down_at}", style("failed")))
    else:
        load.append(("▶ running" + (f" on {ui.turn}" if ui.turn else ""), style("running")))
        back = snap.outages[-1].end_s if snap.outages else None
        if back is not None and snap.elapsed_s - back < BACK_SHOWN_S:
            load.append((f" · back at {units.elapsed(back)}", style("running")))
    for label, value, value_style in (
        ("in flight ", str(snap.in_flight), None),
        ("done ", str(snap.completed), None),
        ("failed ", str(snap.failed), style("failed") if snap.failed else None),
    ):
        load += [gap, (label, muted), (value, value_style)]
    elapsed_s = ui.stopped_at_s if snap.fatal and ui.stopped_at_s is not None else snap.elapsed_s
    load += [gap, (units.elapsed(elapsed_s), muted)]
    rates: list[Span] = [
        (units.rate(snap.output_tps), style("value")),
        (" tok/s", muted),
        gap,
        (units.rate(snap.request_per_s, 2), style("value")),
        (" req/s", muted),
    ]
    if snap.health.saturated:
        rates += [gap, (SATURATED_BADGE, style("warning"))]
    if ui.ramp:
        rates += [gap, (ui.ramp, style("ramp"))]
    if ui.frozen:
        rates += [gap, ("text frozen (p)", style("frozen"))]
    if ui.frames:
        frames: list[Span] = [gap, (ui.frames, muted)]
        if width is None or _cells(rates + frames) <= width:
            rates += frames
    if width is not None:
        rates = _fit(rates, width)
    return [where, load, rates]


def _cells(spans: list[Span]) -> int:
    return sum(cell_len(text) for text, _ in spans)


def _fit(spans: list[Span], width: int) -> list[Span]:
    """The spans cut to ``width`` cells, the last one ending in "…" if anything was cut."""
    if _cells(spans) <= width:
        return spans
    out: list[Span] = []
    room = max(0, width - 1)
    for text, text_style in spans:
        size = cell_len(text)
        if size > room:
            out.append((set_cell_size(text, room) + "…", text_style))
            break
        out.append((text, text_style))
        room -= size
    return out


def status_text(snap: Snapshot, ui: UiState, style: StyleFor) -> Text:
    """`status_lines` as one Rich Text."""
    return spans_to_text(status_lines(snap, ui, style))


STATUS_PARTS = (
    "muted",
    "url",
    "model",
    "demo",
    "load",
    "paused",
    "running",
    "probing",
    "failed",
    "value",
    "warning",
    "ramp",
    "frozen",
)


class StatusBar(TextLines):
    """Target, load, counters, health; rebuilt every tick, so drawn through the line API."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"status--{part}" for part in STATUS_PARTS}
    DEFAULT_CSS = "StatusBar { height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.component_style = ComponentStyles(self, on_change=self.restyle)
        self._shown: tuple[Snapshot, UiState] | None = None

    def show(self, snap: Snapshot, ui: UiState) -> None:
        self._shown = (snap, ui)
        width = self.content_size.width or None  # 0 before the first layout: no limit yet
        self.set_lines(status_lines(snap, ui, lambda part: self.component_style(f"status--{part}"), width))

    def on_resize(self) -> None:
        # The third line is fitted to the width: refit it now, not at the next fresh snapshot.
        if self._shown is not None:
            self.show(*self._shown)


def fatal_hint(snap: Snapshot) -> str:
    """What to check when the fatal reason does not say it: a 404 names only what the server said (often
    just "Not Found"), so the hint names the URL and the model that were asked for."""
    if not snap.fatal or "HTTP 404" not in snap.fatal:
        return ""
    path = API_PATHS.get(snap.endpoint, "")
    return f"{snap.base_url}{path} with model {snap.model}: check --url, --api, --endpoint and --model"


class FatalBanner(Static):
    """The engine's fatal reason, shown across the top until the user quits."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[str | None, str] = (None, "")

    def show(self, reason: str | None, *, prefix: str = "✗ engine stopped: ", hint: str = "") -> None:
        if (reason, hint) == self._shown:
            return
        self._shown = (reason, hint)
        self.display = bool(reason)
        if reason:
            # The contract says one line; a multi-line reason must not eat the screen.
            one_line = " ".join(reason.split())
            parts: list[str | tuple[str, str]] = [(prefix, "bold"), one_line]
            if hint:
                parts += [" · ", hint]
            self.update(Content.assemble(*parts, "   (q quits)"))
