"""The request detail of a request still streaming: it shows the chunk timeline so far and follows it live,
then stops re-reading once the request has finished."""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.app.conftest import MakeApp, settle
from tests.support.fake_engine import FakeEngine
from tui.app.widgets.detail import RequestDetailScreen
from tui.engine.aggregate.store import Store
from tui.engine.config import LoadTarget
from tui.engine.records import RequestRecord
from tui.engine.snapshot import RequestDetail
from tui.engine.wire import Batch, LaneDelta

pytestmark = pytest.mark.timeout(30)
MS = 1_000_000
RID = 302  # the frozen snapshot's second lane, streaming
SENT_NS = 1_000 * MS


class LiveDetailEngine(FakeEngine):
    """Frozen snapshots, but `detail()` reads a real `Store` that the test feeds worker lane deltas."""

    def __init__(self) -> None:
        super().__init__()
        self.store = Store(0, workers=1)
        self.store.begin_level(4, LoadTarget(), 0)
        self.stamps = array("q")
        self.reads = 0

    def stream(self, n: int, *, last_gap_ms: int = 40) -> None:
        """``n`` more chunks of one token, 40 ms apart after a 400 ms TTFT (the last one ``last_gap_ms`` after
        the one before), in one worker batch."""
        lo = len(self.stamps)
        self.stamps.extend(SENT_NS + 400 * MS + 40 * MS * i for i in range(lo, lo + n))
        self.stamps[-1] += (last_gap_ms - 40) * MS
        new = self.stamps[lo:]
        delta = LaneDelta(RID, 4, SENT_NS, "tok " * n, len(self.stamps), self.stamps[0], new.tobytes(), None)
        self.store.ingest(Batch(0, self.stamps[-1], 4, lanes=[delta]))

    def finish(self) -> None:
        rec = RequestRecord(
            request_id=RID, worker=0, seq=RID, level_id=4, sent_ns=SENT_NS, first_content_ns=self.stamps[0],
            end_ns=self.stamps[-1] + MS, chunk_ns=self.stamps, output_tokens=len(self.stamps),
            output_source="usage",
        )  # fmt: skip
        self.store.ingest(Batch(0, rec.end_ns, 4, records=[rec]))

    def detail(self, request_id: int) -> RequestDetail | None:
        self.reads += 1
        return self.store.detail(request_id, self.stamps[-1] if self.stamps else SENT_NS)


@pytest.fixture
def engine() -> FakeEngine:
    return LiveDetailEngine()


def _summary(screen: RequestDetailScreen) -> str:
    return str(screen.query_one("#detail-summary").render())


async def _until(pilot: Pilot[Any], cond: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    """Let the app run (its timers fire) until ``cond`` holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


async def test_detail_of_a_streaming_request_shows_its_timeline_so_far_and_follows_it(
    make_app: MakeApp, engine: LiveDetailEngine
) -> None:
    engine.stream(5)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RequestDetailScreen) and screen.request_id == RID
        summary = _summary(screen)
        assert "state streaming" in summary and "chunks 5" in summary and "out 5" in summary
        assert "ITL chunk p50/p99 40ms/40ms   so far" in summary
        assert "TPOT 40ms" in summary and "TTFT 400ms" in summary
        timeline = screen.query_one("#detail-timeline")
        assert timeline.display and str(timeline.render()).count("█") == 4  # 4 equal gaps

        engine.stream(20, last_gap_ms=100)  # a slower chunk at the end shows in the ITL p99
        await _until(pilot, lambda: "chunks 25" in _summary(screen), "the modal to show 25 chunks")
        summary = _summary(screen)
        assert "out 25" in summary and "so far" in summary and "ITL chunk p50/p99 40ms/" in summary
        assert "40ms/40ms" not in summary
        assert len(str(timeline.render()).splitlines()[-1]) == 24

        engine.finish()
        await _until(pilot, lambda: "state ok" in _summary(screen), "the modal to show the finished request")
        summary = _summary(screen)
        assert "so far" not in summary and "chunks 25" in summary and "E2E 1.4s" in summary
        assert screen._timer is None, "still re-reading a finished request"
        reads = engine.reads
        await settle(pilot)
        assert engine.reads == reads
