"""The screen's layout: every pane, or in a small terminal one group of them at a time (`v` cycles), or
`watch`'s server pane alone. One rule for a resize and for `v`; `tokentop.tcss` reads its classes."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Container, Horizontal
from textual.screen import Screen
from textual.widget import Widget

VIEWS = ("live", "latency", "levels", "server")
"""Pane groups shown one at a time when the terminal is too small for all of them (`v` cycles)."""
COMPACT_BELOW = (120, 36)
"""Width and height under which the app shows one view at a time."""
ALL_ON_SCREEN = "every pane is on screen: views take turns below {}x{}".format(*COMPACT_BELOW)
"""What `v` says when there is nothing to cycle."""


def is_compact(width: int, height: int) -> bool:
    """Whether a terminal of this size gets the small layout."""
    return width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]


def next_view(view: str) -> str:
    return VIEWS[(VIEWS.index(view) + 1) % len(VIEWS)]


def set_layout(screen: Screen[object], *, compact: bool, watch_only: bool, view: str) -> None:
    """Put the classes the CSS lays the panes out by on the main screen."""
    screen.set_class(compact and not watch_only, "-compact")
    screen.set_class(watch_only, "-watch")
    for name in VIEWS:
        screen.set_class(view == name, f"-view-{name}")


def body(*, top: Sequence[Widget], mid: Sequence[Widget], bottom: Sequence[Widget]) -> ComposeResult:
    """The panes in rows `#top`, `#mid` and `#bottom`, the groups the CSS shows or hides by view."""
    with Container(id="body"):
        for row, panes in (("top", top), ("mid", mid), ("bottom", bottom)):
            with Horizontal(id=row):
                yield from panes
