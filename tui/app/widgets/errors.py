"""Errors by class over the run, and the last few messages."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui.engine.snapshot import Snapshot


def errors_content(snap: Snapshot, max_messages: int = 5) -> Content:
    """Pure: counts by class then the newest messages (newest first). The run's notices come among the
    messages in the warning colour, and with no failure the pane still says "no errors" first: a notice
    (a dropped ignore_eos, lengths off target) is not a failed request."""
    if not snap.errors and not snap.recent_errors and not snap.skipped_lines:
        return Content.styled("no errors", "$success")
    notices = set(snap.notices)
    parts: list[str | tuple[str, str]] = [] if snap.errors else [("no errors", "$success"), "\n"]
    for name, count in sorted(snap.errors, key=lambda item: -item[1]):
        parts += [(f"{count:>5} ", "bold $error"), (name, "$error"), "\n"]
    if snap.skipped_lines:  # not failures: each stream went on past its bad line
        lines = "line" if snap.skipped_lines == 1 else "lines"
        parts += [
            (f"{snap.skipped_lines} malformed {lines} skipped (streams went on)", "$text-warning"),
            "\n",
        ]
    if snap.recent_errors:
        parts.append(("last:\n", "$text-muted"))
        for message in reversed(snap.recent_errors[-max_messages:]):
            parts += [(message, "$text-warning" if message in notices else "$text-error"), "\n"]
    return Content.assemble(*parts).rstrip("\n")


class ErrorsPane(Static):
    """Failed requests by error class and the latest messages."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: object = None

    def show(self, snap: Snapshot) -> None:
        key = (snap.errors, snap.recent_errors, snap.skipped_lines)
        if key != self._key:
            self._key = key
            self.update(errors_content(snap))
            self.border_title = f"errors · {sum(n for _, n in snap.errors)}"
