"""Token streams: one lane per in-flight request, its newest text arriving at the right edge."""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

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


def _one_line(text: str) -> str:
    return text.replace("\r", "").replace("\n", "⏎").replace("\t", " ")


def lane_meta(lane: LaneView) -> str:
    """The fixed-width columns before a lane's text: id, age, TTFT, tokens/s."""
    ttft = f"{lane.ttft_ms:5.0f}ms" if lane.ttft_ms is not None else "     - "
    tps = f"{lane.tokens_per_s:5.1f}t/s" if lane.tokens_per_s is not None else "     -   "
    return f"#{lane.request_id:<6d}{lane.age_s:5.1f}s {ttft} {tps} "


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
        """The user asked to inspect a request."""

        def __init__(self, request_id: int) -> None:
            super().__init__()
            self.request_id = request_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lanes: tuple[LaneView, ...] = ()
        self._hidden = 0
        self._selected: int | None = None
        """Request id under the cursor; kept across updates so a lane does not jump away."""

    def show(self, lanes: tuple[LaneView, ...], hidden: int) -> None:
        if self.frozen or (lanes == self._lanes and hidden == self._hidden):
            return
        self._lanes = lanes
        self._hidden = hidden
        self.refresh()

    @property
    def selected(self) -> int | None:
        return self._selected if any(lane.request_id == self._selected for lane in self._lanes) else None

    def watch_frozen(self, frozen: bool) -> None:
        self.border_subtitle = "frozen: p resumes" if frozen else ""

    def _visible(self) -> tuple[list[LaneView], int]:
        rows = max(0, self.content_size.height)
        lanes = list(self._lanes)
        more = self._hidden
        if len(lanes) > rows or (more and len(lanes) >= rows):
            keep = max(0, rows - 1)
            more += len(lanes) - keep
            lanes = lanes[:keep]
        return lanes, more

    def render(self) -> Text:
        width = self.content_size.width
        lanes, more = self._visible()
        if not lanes and not more:
            return Text("no requests in flight", style=self.get_component_rich_style("lanes--waiting"))
        meta_style = self.get_component_rich_style("lanes--meta")
        text_style = self.get_component_rich_style("lanes--text")
        cursor = self.get_component_rich_style("lanes--cursor")
        selected = self.selected if self.has_focus else None
        out = Text(no_wrap=True, overflow="crop")
        for index, lane in enumerate(lanes):
            if index:
                out.append("\n")
            line = Text(no_wrap=True, overflow="crop")
            meta = lane_meta(lane)
            line.append(meta, style=meta_style)
            room = max(0, width - len(meta))
            state = lane.state
            if state == "waiting":
                line.append("waiting for first token…", style=self.get_component_rich_style("lanes--waiting"))
            elif state == "streaming":
                line.append(tail_cells(_one_line(lane.text_tail), room), style=text_style)
            elif state == "ok":
                done = f"✓ done, {lane.output_tokens} tok  "
                line.append(done, style=self.get_component_rich_style("lanes--ok"))
                line.append(tail_cells(_one_line(lane.text_tail), room - len(done)), style=meta_style)
            elif state == "error":
                line.append(
                    f"✗ {_one_line(lane.error or 'error')}",
                    style=self.get_component_rich_style("lanes--error"),
                )
            else:
                line.append("– cancelled", style=self.get_component_rich_style("lanes--cancelled"))
            if lane.request_id == selected:
                line.pad_right(max(0, width - line.cell_len))
                line.stylize(cursor)
            out.append_text(line)
        if more:
            if lanes:
                out.append("\n")
            out.append(f"+{more} more in flight", style=self.get_component_rich_style("lanes--more"))
        return out

    def action_cursor(self, delta: int) -> None:
        lanes, _ = self._visible()
        if not lanes:
            return
        ids = [lane.request_id for lane in lanes]
        if self._selected in ids:
            index = max(0, min(len(ids) - 1, ids.index(self._selected) + delta))
        else:
            index = 0 if delta > 0 else len(ids) - 1
        self._selected = ids[index]
        self.refresh()

    def action_open(self) -> None:
        if self.selected is None:
            self.action_cursor(1)
        if self.selected is not None:
            self.post_message(self.Open(self.selected))

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
            request_id = lanes[row].request_id
            if request_id == self._selected and self.has_focus:
                self.post_message(self.Open(request_id))
            self._selected = request_id
            self.focus()
            self.refresh()
