"""The status lines at the top: where the load goes, what it is, and how the run is going."""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content
from textual.widgets import Static

from tui.engine.config import LoadTarget
from tui.engine.snapshot import Snapshot


@dataclass(frozen=True)
class UiState:
    """App-side facts the status line shows next to the snapshot."""

    target: LoadTarget
    ramp: str = ""
    """Auto-ramp progress, empty when no ramp runs."""
    frozen: bool = False
    frames: str = ""


def format_elapsed(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def status_content(snap: Snapshot, ui: UiState) -> Content:
    """Pure: the status text for a snapshot (the widget only displays it). Three lines fit 80 columns:
    where, the load and its requests, the throughput and the app's own health."""
    gap = "   "
    muted = "$text-muted"
    where: list[str | tuple[str, str]] = [
        (snap.base_url, "bold $primary"),
        (" · ", muted),
        (snap.model or "(model?)", "bold"),
        (" · ", muted),
        (snap.endpoint, muted),
    ]
    if snap.demo:
        where += ["  ", ("demo: built-in simulator", "$text-accent on $accent-muted")]
    target = ui.target
    state = ("⏸ paused", "bold $warning") if target.paused else ("▶ running", "$success")
    load: list[str | tuple[str, str]] = [
        (target.label(), "bold $accent"),
        " ",
        state,
        gap,
        ("in flight ", muted),
        str(snap.in_flight),
        gap,
        ("done ", muted),
        str(snap.completed),
        gap,
        ("failed ", muted),
        (str(snap.failed), "bold $error" if snap.failed else ""),
        gap,
        (format_elapsed(snap.elapsed_s), muted),
    ]
    rates: list[str | tuple[str, str]] = [
        (f"{snap.output_tps:,.1f}", "bold"),
        (" tok/s", muted),
        gap,
        (f"{snap.request_per_s:.2f}", "bold"),
        (" req/s", muted),
    ]
    if ui.frames:
        rates += [gap, (ui.frames, muted)]
    if snap.health.saturated:
        reason = snap.health.reason or "the load generator cannot keep up"
        rates += [gap, (f"⚠ client saturated: {reason} (try --workers)", "bold $warning")]
    if ui.ramp:
        rates += [gap, (f"auto ramp: {ui.ramp}", "$secondary")]
    if ui.frozen:
        rates += [gap, ("text frozen (p)", "$warning")]
    return Content("\n").join([Content.assemble(*where), Content.assemble(*load), Content.assemble(*rates)])


class StatusBar(Static):
    """Target, load, counters, health."""

    def show(self, snap: Snapshot, ui: UiState) -> None:
        self.update(status_content(snap, ui))


class FatalBanner(Static):
    """The engine's fatal reason, shown across the top until the user quits."""

    def show(self, reason: str | None) -> None:
        self.display = bool(reason)
        if reason:
            self.update(Content.assemble(("✗ engine stopped: ", "bold"), reason, "   (q quits)"))
