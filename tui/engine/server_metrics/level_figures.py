"""Each load level's server figures, kept once they can no longer change.

The poller's ring holds the last hour of scrapes (at the default 1 Hz). Computed from the ring every time, a
level older than that would lose its figures, in the level table and in the saved results, and every ended
level would cost a pass over its scrapes on every refresh. So a level's figures are frozen once the level
has settled (ended, and its last requests are in: until then its window still grows) and a scrape after
its window has come in (that scrape ends the hold of the last reading inside it); any other is computed
anew. The table and the results each keep their own `LevelFigures`, over the same spans
(`level_spans_ns`), so what the screen shows is what the file says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, NamedTuple, TypeVar

from tui.engine.server_metrics.view import ServerView
from tui.engine.snapshot import LevelView

T = TypeVar("T")


class LevelSpan(NamedTuple):
    """The window a level's server figures cover, on the engine's clock (``perf_counter_ns``)."""

    level_id: int
    t_from_ns: int
    t_to_ns: int
    settled: bool
    """The level's window no longer changes (`LevelView.settled`): its figures can be kept."""


def level_spans_ns(levels: Iterable[LevelView], t0_ns: int, now_ns: int) -> list[LevelSpan]:
    """Each level's steady window (its whole span when it has none, to ``now_ns`` while it runs), as
    `LevelView.span_s` defines it; a level with an empty span is left out."""
    spans = []
    for lv in levels:
        span = lv.span_s((now_ns - t0_ns) / 1e9)
        if span is not None:
            t_from, t_to = t0_ns + int(span[0] * 1e9), t0_ns + int(span[1] * 1e9)
            spans.append(LevelSpan(lv.level_id, t_from, t_to, lv.settled))
    return spans


class LevelFigures(Generic[T]):
    """``compute(view, t_from_ns, t_to_ns)`` per level (`ServerView.table_figures` for the table,
    `ServerView.level_summary` for results), frozen per level as the module says. One user at a time: each
    face thread keeps its own."""

    def __init__(self, compute: Callable[[ServerView, int, int], T]) -> None:
        self._compute = compute
        self._frozen: dict[tuple[int, int, int], T] = {}

    def of(self, view: ServerView, spans: Iterable[LevelSpan]) -> dict[int, T]:
        """The figures of each level in ``spans``, by level id."""
        last_ns = view.readings[-1].t_ns if view.readings else None
        out: dict[int, T] = {}
        for span in spans:
            key = (span.level_id, span.t_from_ns, span.t_to_ns)
            figures = self._frozen.get(key)
            if figures is None:
                figures = self._compute(view, span.t_from_ns, span.t_to_ns)
                if _keepable(span, last_ns):
                    self._frozen[key] = figures
            out[span.level_id] = figures
        return out

    def keep(self, view: ServerView, spans: Iterable[LevelSpan]) -> None:
        """Freeze every level in ``spans`` that can be frozen now and is not yet, computing nothing else: for
        a face's every tick, so a settled level's figures are kept even when nobody asks for them until the
        ring has moved on (the results, written at the end)."""
        last_ns = view.readings[-1].t_ns if view.readings else None
        ready = [
            s
            for s in spans
            if _keepable(s, last_ns) and (s.level_id, s.t_from_ns, s.t_to_ns) not in self._frozen
        ]
        if ready:
            self.of(view, ready)


def _keepable(span: LevelSpan, last_ns: int | None) -> bool:
    """A settled level whose window a later scrape has closed: its figures no longer change."""
    return span.settled and last_ns is not None and last_ns >= span.t_to_ns
