"""The store folds arrivals and records when they are read, many batches at once: every figure is what
folding each batch as it came gave."""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from tui.engine.aggregate import series as series_mod
from tui.engine.aggregate.series import MetricSeries
from tui.engine.aggregate.store import Store
from tui.engine.bins import FINE_CENTERS_MS, N_FINE, fine_bins
from tui.engine.config import LoadTarget
from tui.engine.load.arrival_counts import ArrivalCollector
from tui.engine.records import RequestRecord
from tui.engine.wire import Batch, Health

MS = 1_000_000


def _batch(worker: int, r: int, level: int) -> Batch:
    """Round ``r`` of ``worker``: 8 requests that ended in it (chunk gaps of 2-30 ms, some chunks of two
    tokens), with their arrivals as a worker counts them."""
    t_ns = (r + 1) * 100 * MS
    arrivals = ArrivalCollector()
    records = []
    for k in range(8):
        rid = (r * 8 + k) * 2 + worker + 1
        sent = t_ns - 400 * MS - k * 7 * MS
        gap = (2 + (rid * 7) % 29) * MS
        chunks = array("q", [sent + (30 + 5 * k) * MS + i * gap for i in range(12)])
        tokens = array("q", [1 + (i % 3 == 0) for i in range(12)])
        records.append(RequestRecord(rid, worker, rid, level, sent, first_content_ns=chunks[0],
                                     end_ns=chunks[-1] + MS, chunk_ns=chunks, chunk_tokens=tokens,
                                     output_tokens=sum(tokens), output_source="usage"))  # fmt: skip
        arrivals.note(level, sent, None, chunks.tobytes(), tokens.tobytes())
    return Batch(worker, t_ns, level, None, 8, (), 8 * 16, records, Health(0.1, 0.1),
                 arrivals=arrivals.take())  # fmt: skip


def _run(fold_each: bool) -> Store:
    st = Store(0, workers=2)
    st.begin_level(1, LoadTarget(concurrency=16), 0)
    for r in range(24):
        if r == 12:
            st.begin_level(2, LoadTarget(concurrency=24), (r + 1) * 100 * MS - 50 * MS)
        for w in (0, 1):
            st.ingest(_batch(w, r, 1 if r < 13 else 2))
            if fold_each:
                st.fold()
    return st


def test_folding_every_batch_at_once_gives_what_folding_each_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(series_mod, "SERIES_CAP", 512)  # one fold brings more than a ring holds
    each, once = _run(fold_each=True), _run(fold_each=False)
    assert once._pending and not each._pending  # nothing read yet: gathered, not folded
    now = 25 * 100 * MS
    a, b = each.refresh_views(now, force=True), once.refresh_views(now, force=True)
    assert not once._pending
    assert repr(a.level_views) == repr(b.level_views)  # the levels' figures, to the last bit (NaN too)
    for lv_a, lv_b in zip(each.levels.values(), once.levels.values(), strict=True):
        assert np.array_equal(lv_a.timeline.b, lv_b.timeline.b)
        assert lv_a.req.seen == lv_b.req.seen == (13 if lv_a.level_id == 1 else 11) * 16
        assert lv_a.first_token_count == lv_b.first_token_count
    for name in ("ttft", "itl_chunk", "e2e"):
        s_a, s_b = each.series[name], once.series[name]
        assert np.array_equal(s_a.all_hist, s_b.all_hist) and s_a.all_hist.sum() == s_a.count
        assert (s_a.count, s_a.evicted_max_t) == (s_b.count, s_b.evicted_max_t)
        assert np.array_equal(s_a.slot_hist, s_b.slot_hist) and np.array_equal(s_a.t, s_b.t)
    for window, h in a.ttft_hist.items():
        other = b.ttft_hist[window]
        assert h.counts == other.counts and h.stats.n == other.stats.n
        assert h.stats.mean == pytest.approx(other.stats.mean, rel=1e-12)


def test_a_ring_given_more_than_it_holds_keeps_the_last_and_counts_them_all() -> None:
    s = MetricSeries(0, cap=4)
    s.add(np.array([1, 2], dtype=np.int64), np.array([1.0, 2.0]))
    s.add(np.arange(3, 10, dtype=np.int64), np.arange(3.0, 10.0))
    assert s.count == 9 and int(s.all_hist.sum()) == 9 and s.all_moments.n == 9
    assert sorted(s.v.tolist()) == [6.0, 7.0, 8.0, 9.0] and s.evicted_max_t == 5
    assert s.histogram(9, None).stats.n == 9


def test_a_bins_middle_lies_in_its_bin() -> None:
    # binned arrivals enter the series with their bins as sent, not searched again from their middles
    assert np.array_equal(fine_bins(FINE_CENTERS_MS), np.arange(N_FINE))


def test_per_chunk_counts_weigh_their_own_requests_chunks_only_where_each_chunk_has_one() -> None:
    from tui.engine.aggregate.levels import ok_columns

    def rec(rid: int, n: int, counts: list[int] | None) -> RequestRecord:
        stamps = array("q", range(rid * 100, rid * 100 + n))
        tokens = None if counts is None else array("q", counts)
        return RequestRecord(rid, 0, rid, 1, 1, first_content_ns=stamps[0], end_ns=rid * 100 + n,
                             chunk_ns=stamps, chunk_tokens=tokens, output_tokens=12)  # fmt: skip

    # counted per chunk; none (usage spread evenly); one count short (spread too); counted again
    cols = ok_columns([rec(1, 3, [2, 3, 7]), rec(2, 4, None), rec(3, 3, [5, 5]), rec(4, 2, [4, 8])])
    assert cols.chunk_w.tolist() == [2, 3, 7, 3, 3, 3, 3, 4, 4, 4, 4, 8]
    assert cols.chunk_arrived_w.tolist() == [2, 3, 7, 1, 1, 1, 1, 1, 1, 1, 4, 8]
