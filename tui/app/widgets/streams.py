"""Token streams: one lane per in-flight request, its newest text arriving at the right edge."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from tui.app.widgets.styles import ComponentStyles
from tui.engine.snapshot import LaneView


def tail_cells(text: str, width: int) -> str:
    """The end of `text` that fits in `width` terminal cells (wide characters count twice)."""
    if width <= 0:
        return ""
    if len(text) <= width and cell_len(text) <= width:
        return text
    out: list[str] = []
    used = 0
    for char in reversed(text[-width * 2 :]):
        w = cell_len(char)
        if used + w > width:
            break
        out.append(char)
        used += w
    return "".join(reversed(out))


def _key(lane: LaneView) -> tuple[str, int]:
    """A lane's identity: two endpoints number their requests alike."""
    return (lane.side, lane.request_id)


_STATE_ORDER = {"streaming": 0, "waiting": 1, "error": 2, "ok": 3, "cancelled": 3}
_IN_FLIGHT = ("streaming", "waiting")


def visible_lanes(lanes: Sequence[LaneView], in_flight: int, rows: int) -> tuple[list[LaneView], int]:
    """Pure: the lanes that fit ``rows`` (in the given order) and how many requests in flight are not
    among them, so shown in flight + more == ``in_flight``. Finished lanes that linger are never counted
    as in flight; when a "+N more" row is needed it takes the last row."""

    def more_than(shown: Sequence[LaneView]) -> int:
        return max(0, in_flight - sum(lane.state in _IN_FLIGHT for lane in shown))

    rows = max(0, rows)
    shown = list(lanes[:rows])
    more = more_than(shown)
    if more and len(shown) >= rows:
        shown = shown[: max(0, rows - 1)]
        more = more_than(shown)
    return shown, more


def _one_line(text: str) -> str:
    return text.replace("\r", "").replace("\n", "⏎").replace("\t", " ")


REASONING_MARK = "▸ "
"""Between a lane's reasoning (drawn dim and italic) and its answer, when both show."""


def lane_text(lane: LaneView, width: int) -> tuple[str, str, str]:
    """Pure: the (reasoning, mark, answer) that fit ``width`` cells, newest text at the right edge: the
    answer's end, and before it the reasoning's end (what a reasoning model thought before it answered)."""
    answer = tail_cells(_one_line(lane.text_tail), width)
    if not lane.reasoning_tail:
        return "", "", answer
    mark = REASONING_MARK if answer else ""
    room = width - cell_len(answer) - len(mark)
    reasoning = tail_cells(_one_line(lane.reasoning_tail), room)
    return reasoning, mark if reasoning else "", answer


def lane_meta(lane: LaneView) -> str:
    """The fixed-width columns before a lane's text: id, age, TTFT, tokens/s."""
    ttft = f"{lane.ttft_ms:5.0f}ms" if lane.ttft_ms is not None else "     - "
    tps = f"{lane.tokens_per_s:5.1f}t/s" if lane.tokens_per_s is not None else "     -   "
    side = f"{lane.side} " if lane.side else ""
    return f"{side}#{lane.request_id:<6d}{lane.age_s:5.1f}s {ttft} {tps} "


class StreamLanes(Widget, can_focus=True):
    """Lanes of live token text. Focus it (tab) to pick a lane with up/down and open it with enter."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "lane up", show=False),
        Binding("down,j", "cursor(1)", "lane down", show=False),
        Binding("enter", "open", "open request"),
        Binding("escape", "leave", "back to load keys", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "lanes--meta",
        "lanes--text",
        "lanes--reasoning",
        "lanes--waiting",
        "lanes--ok",
        "lanes--error",
        "lanes--cancelled",
        "lanes--cursor",
        "lanes--more",
    }

    frozen: reactive[bool] = reactive(False)
    """When True the lanes stop updating (the `p` key) so text can be read."""

    class Open(Message):
        """The user asked to inspect a request (``side``: of which endpoint, with two)."""

        def __init__(self, request_id: int, side: str = "") -> None:
            super().__init__()
            self.request_id = request_id
            self.side = side

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lanes: tuple[LaneView, ...] = ()
        self._source: tuple[LaneView, ...] = ()
        self._in_flight = 0
        self._selected: tuple[str, int] | None = None
        self._whole = False
        """The lanes are requests answered whole (embeddings), not streams of text."""
        self._note = ""
        self.component_style = ComponentStyles(self, on_change=self.refresh_rows)
        self._rows: list[Strip] | None = None
        self._rows_key: object = None
        """Side and request id under the cursor; kept across updates so a lane does not jump away."""

    def show(self, lanes: tuple[LaneView, ...], in_flight: int, *, whole_answers: bool = False) -> None:
        """The snapshot's lanes and its in-flight count (what the "+N more" row counts up to).
        ``whole_answers``: the API answers whole (embeddings): a lane is a request, with no text to show."""
        self._whole = whole_answers
        if self.frozen or (lanes == self._source and in_flight == self._in_flight):
            return
        self._source = lanes
        # In-flight lanes first (oldest on top), then errors, then the recently finished: when rows run
        # out, what is still streaming is what stays on screen.
        self._lanes = tuple(
            sorted(lanes, key=lambda lane: (_STATE_ORDER[lane.state], lane.side, lane.request_id))
        )
        self._in_flight = in_flight
        self.refresh_rows()

    @property
    def selected(self) -> tuple[str, int] | None:
        """The side and request id of the lane under the cursor, if it is still shown."""
        return self._selected if any(_key(lane) == self._selected for lane in self._lanes) else None

    def watch_frozen(self, frozen: bool) -> None:
        self.border_subtitle = "frozen: p resumes" if frozen else self._note

    def set_note(self, note: str) -> None:
        """A standing note under the lanes (why their text is blank, say); "frozen" takes its place while
        frozen."""
        self._note = note
        self.watch_frozen(self.frozen)

    def _visible(self) -> tuple[list[LaneView], int]:
        return visible_lanes(self._lanes, self._in_flight, self.content_size.height)

    def _build_lines(self) -> list[Strip]:
        """One Strip per row, built straight from segments: at 10 Hz with many lanes this is several
        times cheaper than a Text that Textual must convert, wrap and split again."""
        width = self.content_size.width
        base = self.rich_style
        lanes, more = self._visible()

        def strip(*parts: tuple[str, Style]) -> Strip:
            segments = [Segment(text, base + style) for text, style in parts if text]
            return Strip(segments).adjust_cell_length(width, base)

        if not lanes and not more:
            return [strip(("no requests in flight", self.component_style("lanes--waiting")))]
        meta_style = self.component_style("lanes--meta")
        text_style = self.component_style("lanes--text")
        reasoning_style = self.component_style("lanes--reasoning")
        cursor = self.component_style("lanes--cursor")
        selected = self.selected if self.has_focus else None
        rows: list[Strip] = []
        for lane in lanes:
            meta = lane_meta(lane)
            room = max(0, width - len(meta))
            state = lane.state
            parts: list[tuple[str, Style]] = [(meta, meta_style)]
            if state == "waiting":
                waiting = "waiting for the answer…" if self._whole else "waiting for first token…"
                parts.append((waiting, self.component_style("lanes--waiting")))
            elif state == "ok" and self._whole:
                parts.append(("✓ answered", self.component_style("lanes--ok")))
            elif state == "streaming":
                reasoning, mark, answer = lane_text(lane, room)
                parts += [(reasoning, reasoning_style), (mark, meta_style), (answer, text_style)]
            elif state == "ok":
                done = f"✓ done, {lane.output_tokens} tok  "
                parts.append((done, self.component_style("lanes--ok")))
                reasoning, mark, answer = lane_text(lane, room - len(done))
                parts += [(reasoning, reasoning_style), (mark, meta_style), (answer, meta_style)]
            elif state == "error":
                parts.append((f"✗ {_one_line(lane.error or 'error')}", self.component_style("lanes--error")))
            else:
                parts.append(("– cancelled", self.component_style("lanes--cancelled")))
            row = strip(*parts)
            rows.append(row.apply_style(cursor) if _key(lane) == selected else row)
        if more:
            rows.append(strip((f"+{more} more in flight", self.component_style("lanes--more"))))
        return rows

    def render_line(self, y: int) -> Strip:
        key = (self.content_size, self.has_focus, self._selected)
        if self._rows is None or key != self._rows_key:
            self._rows = self._build_lines()
            self._rows_key = key
        if y < len(self._rows):
            return self._rows[y]
        return Strip.blank(self.content_size.width, self.rich_style)

    def refresh_rows(self) -> None:
        self._rows = None
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        lanes, _ = self._visible()
        if not lanes:
            return
        ids = [_key(lane) for lane in lanes]
        if self._selected in ids:
            index = max(0, min(len(ids) - 1, ids.index(self._selected) + delta))
        else:
            index = 0 if delta > 0 else len(ids) - 1
        self._selected = ids[index]
        self.refresh()

    def action_open(self) -> None:
        if self.selected is None:
            self.action_cursor(1)
        if (selected := self.selected) is not None:
            self.post_message(self.Open(selected[1], selected[0]))

    def action_leave(self) -> None:
        self.screen.set_focus(None)

    def on_focus(self) -> None:
        if self.selected is None:
            self.action_cursor(1)
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def on_click(self, event: events.Click) -> None:
        lanes, _ = self._visible()
        offset = event.get_content_offset(self)
        row = -1 if offset is None else offset.y
        if 0 <= row < len(lanes):
            key = _key(lanes[row])
            if key == self._selected and self.has_focus:
                self.post_message(self.Open(key[1], key[0]))
            self._selected = key
            self.focus()
            self.refresh()
