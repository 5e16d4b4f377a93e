"""The one request-detail builder: a request's detail while it streams and once it has finished come from the
same function over the same stamps, so they agree on every figure both can know."""

from __future__ import annotations

from array import array

import pytest

from tui.engine.aggregate import lanes as lanes_mod
from tui.engine.aggregate.lanes import Lanes, lane_detail, record_detail
from tui.engine.records import RequestRecord
from tui.engine.wire import LaneDelta

MS = 1_000_000
SENT_NS = 1_000 * MS
SHARED = ("chunk_offsets_ms", "chunk_tokens", "ttft_ms", "tpot_ms", "itl_chunk", "output_tokens", "sent_s")


def _stream(lanes: Lanes, n: int, *, counted: bool) -> array[int]:
    """``n`` chunks 20 ms apart after a 100 ms TTFT, three tokens each when the server counts them (else
    the worker counts one per chunk), in deltas of four chunks."""
    stamps = array("q", [SENT_NS + 100 * MS + 20 * MS * i + (5 * MS if i == 7 else 0) for i in range(n)])
    per = 3 if counted else 1
    for lo in range(0, n, 4):
        new = stamps[lo : lo + 4]
        counts = array("q", [per] * len(new)).tobytes() if counted else None
        lanes.apply(LaneDelta(9, 1, SENT_NS, "ab", per * (lo + len(new)), stamps[0], new.tobytes(), counts))
    return stamps


@pytest.mark.parametrize("counted", [True, False])
def test_in_flight_and_finished_details_agree(counted: bool) -> None:
    lanes = Lanes()
    stamps = _stream(lanes, 10, counted=counted)
    live = lanes.detail(9, 0)
    assert live is not None and live.state == "streaming" and live.e2e_ms is None
    assert live.token_source == ("usage" if counted else "chunks")
    rec = RequestRecord(
        request_id=9, worker=0, seq=4, level_id=1, sent_ns=SENT_NS, first_content_ns=stamps[0],
        end_ns=stamps[-1], chunk_ns=stamps, chunk_tokens=array("q", [3] * 10) if counted else None,
        output_tokens=30 if counted else 10, output_source="usage" if counted else "chunks", input_tokens=7,
    )  # fmt: skip
    lanes.finish(rec)
    done = lanes.detail(9, 0)
    assert done is not None and done.state == "ok" and done.e2e_ms == pytest.approx(280.0)
    for name in SHARED:
        assert getattr(done, name) == getattr(live, name), name
    assert done.input_tokens == 7 and live.input_tokens is None
    assert live.chunk_tokens == ((3,) if counted else (1,)) * 10
    assert live.itl_chunk.n == 9 and live.itl_chunk.max == pytest.approx(25.0)
    assert live.tpot_ms == pytest.approx(180.0 / (29 if counted else 9))


def test_a_usage_total_without_per_chunk_counts_is_spread_over_the_chunks() -> None:
    stamps = array("q", [SENT_NS + 50 * MS + 10 * MS * i for i in range(4)])
    rec = RequestRecord(
        request_id=3, worker=0, seq=1, level_id=1, sent_ns=SENT_NS, first_content_ns=stamps[0],
        end_ns=stamps[-1], chunk_ns=stamps, output_tokens=10, output_source="usage",
    )  # fmt: skip
    d = record_detail(rec, 0, text="hi")
    assert d.chunk_tokens == (2, 3, 3, 2) and sum(d.chunk_tokens) == 10 and d.text == "hi"


def test_a_lane_whose_record_left_the_ring_keeps_text_and_times_but_no_timeline() -> None:
    lanes = Lanes()
    stamps = _stream(lanes, 6, counted=True)
    rec = RequestRecord(
        request_id=9, worker=0, seq=4, level_id=1, sent_ns=SENT_NS, first_content_ns=stamps[0],
        end_ns=stamps[-1] + MS, chunk_ns=stamps, output_tokens=18, output_source="usage",
    )  # fmt: skip
    lanes.finish(rec)
    lanes.recent.clear()
    d = lane_detail(lanes.finished[9], 0)
    assert d.state == "ok" and d.chunk_offsets_ms == () and d.tpot_ms is None
    assert d.ttft_ms == pytest.approx(100.0) and d.e2e_ms == pytest.approx(201.0) and d.text == "ab" * 2


def test_reasoning_is_kept_apart_from_the_answer_and_fills_the_tail_before_it() -> None:
    lanes = Lanes()
    lanes.apply(LaneDelta(3, 1, SENT_NS, "", 2, SENT_NS + MS, b"", None, "let me think"))
    (view,), _ = lanes.views(SENT_NS + 10 * MS)
    assert (view.reasoning_tail, view.text_tail) == ("let me think", "")
    lanes.apply(LaneDelta(3, 1, SENT_NS, "Paris.", 4, SENT_NS + MS, b"", None, " hard"))
    (view,), _ = lanes.views(SENT_NS + 20 * MS)
    assert (view.reasoning_tail, view.text_tail) == ("let me think hard", "Paris.")
    # the answer's tail first; the reasoning gets what is left of the tail's characters
    lanes.apply(LaneDelta(3, 1, SENT_NS, "x" * (lanes_mod.TEXT_TAIL - 10), 5, SENT_NS + MS, b"", None))
    (view,), _ = lanes.views(SENT_NS + 30 * MS)
    assert len(view.text_tail) == lanes_mod.TEXT_TAIL - 4 and view.reasoning_tail == "nk hard"[-4:]
    detail = lanes.detail(3, 0)
    assert detail is not None and detail.text.startswith("let me think hard\n\nParis.")
