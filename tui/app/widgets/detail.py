"""A request opened from its lane: timings, chunk timeline, error and text (live while it streams)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Static

from tui import units
from tui.app.widgets.level_table import level_label
from tui.engine.snapshot import LevelView, RequestDetail

SPARK = "▁▂▃▄▅▆▇█"
LIVE_STATES = ("waiting", "streaming")
REFRESH_S = 0.5
"""How often an open in-flight request is re-read (its detail costs about a millisecond to build)."""


def chunk_timeline(detail: RequestDetail, width: int) -> str:
    """Gaps between content chunks as a sparkline (one cell per chunk, or per group of chunks)."""
    offsets = detail.chunk_offsets_ms
    if len(offsets) < 2 or width <= 0:
        return ""
    gaps = [b - a for a, b in pairwise(offsets)]
    per_cell = max(1, -(-len(gaps) // width))
    cells = [max(gaps[i : i + per_cell]) for i in range(0, len(gaps), per_cell)]
    top = max(cells) or 1.0
    return "".join(SPARK[min(len(SPARK) - 1, int(g / top * (len(SPARK) - 1) + 0.5))] for g in cells)


def detail_content(detail: RequestDetail | None, request_id: int, level: str | None = None) -> Content:
    """Pure: the summary block of a request; ``level``: its level as the level table names it ("8 users"),
    the level's id when the face does not know it."""
    if detail is None:
        return Content.styled(f"request {request_id} is no longer kept by the engine", "$warning")
    state_style = {"ok": "$success", "error": "bold $error", "cancelled": "$warning"}.get(
        detail.state, "$accent"
    )

    def ms(value: float | None) -> str:
        return "-" if value is None else units.ms_label(value)

    itl = (
        f"{units.ms_label(detail.itl_chunk.p50)}/{units.ms_label(detail.itl_chunk.p99)}"
        if detail.itl_chunk.n
        else "-"
    )
    kept = len(detail.chunk_offsets_ms)
    chunks = str(kept + detail.chunks_dropped)
    if detail.chunks_dropped:
        chunks += f" (timeline: latest {kept})"
    rows: list[str | tuple[str, str]] = [
        ("state ", "$text-muted"), (detail.state, state_style),
        ("   level ", "$text-muted"), level or f"#{detail.level_id}",
        ("   sent at ", "$text-muted"), f"{detail.sent_s:.2f} s",
        ("   HTTP ", "$text-muted"), str(detail.http_status or "-"), "\n",
        ("TTFT ", "$text-muted"), (ms(detail.ttft_ms), "bold"),
        ("   E2E ", "$text-muted"), (ms(detail.e2e_ms), "bold"),
        ("   TPOT ", "$text-muted"), (ms(detail.tpot_ms), "bold"),
        ("   ITL chunk p50/p99 ", "$text-muted"),
        itl, ("   so far" if detail.state in LIVE_STATES else "", "$text-muted"), "\n",
        ("tokens in ", "$text-muted"), str(detail.input_tokens if detail.input_tokens is not None else "-"),
        ("   out ", "$text-muted"), str(detail.output_tokens if detail.output_tokens is not None else "-"),
        ("   counted from ", "$text-muted"), detail.token_source,
        ("   chunks ", "$text-muted"), chunks,
    ]  # fmt: skip
    if detail.error or detail.error_class:
        rows += ["\n", (f"✗ {detail.error_class or 'error'}: {detail.error or ''}", "bold $error")]
    return Content.assemble(*rows)


class RequestDetailScreen(ModalScreen[None]):
    """Re-reads the request every ``refresh_s`` while it is in flight (its timeline grows), then stops."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "dismiss", "close")]

    def __init__(
        self,
        request_id: int,
        fetch: Callable[[int], RequestDetail | None],
        refresh_s: float = REFRESH_S,
        *,
        levels: Sequence[LevelView] = (),
    ) -> None:
        super().__init__()
        self.request_id = request_id
        self._fetch = fetch
        self._levels = levels
        """The run's levels: the detail names the request's as the level table does (it shows no ids)."""
        self._refresh_s = refresh_s
        self._detail: RequestDetail | None = None
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="detail-box"):
            yield Static(id="detail-summary")
            yield Static(id="detail-timeline")
            with VerticalScroll(id="detail-text-box"):
                yield Static(id="detail-text")

    def on_mount(self) -> None:
        self.query_one("#detail-box").border_title = f"request {self.request_id}  (escape closes)"
        self.reload()
        if self.live:
            self._timer = self.set_interval(self._refresh_s, self._poll)

    @property
    def live(self) -> bool:
        """The request was still in flight at the last read."""
        return self._detail is not None and self._detail.state in LIVE_STATES

    def _poll(self) -> None:
        self.reload()
        if not self.live and self._timer is not None:
            self._timer.stop()  # finished (this read shows its record) or no longer kept
            self._timer = None

    def reload(self) -> None:
        self._detail = detail = self._fetch(self.request_id)
        level = None
        if detail is not None:
            level = next((level_label(lv) for lv in self._levels if lv.level_id == detail.level_id), None)
        self.query_one("#detail-summary", Static).update(detail_content(detail, self.request_id, level))
        width = max(10, self.query_one("#detail-timeline").content_size.width or 60)
        spark = chunk_timeline(detail, width) if detail is not None else ""
        timeline = self.query_one("#detail-timeline", Static)
        timeline.update(Content.assemble(("chunk gaps over time (taller = longer)\n", "$text-muted"), spark))
        timeline.display = bool(spark)
        self.query_one("#detail-text", Static).update(Text(detail.text if detail is not None else ""))
