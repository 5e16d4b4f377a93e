"""The mark prompt: one line of text, the label of a mark in the recorded session."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Input

MARK_LABEL_MAX = 60


class MarkScreen(ModalScreen[str]):
    """Enter gives the label typed (cut to `MARK_LABEL_MAX`); escape gives "" (no mark)."""

    DEFAULT_CSS = """
    MarkScreen { align: center middle; }
    MarkScreen > Input { width: 60; }
    """
    AUTO_FOCUS = "#mark-label"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def compose(self) -> ComposeResult:
        yield Input(placeholder="mark label (enter to add, escape to cancel)", id="mark-label")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip()[:MARK_LABEL_MAX] or "mark")

    def action_cancel(self) -> None:
        self.dismiss("")
