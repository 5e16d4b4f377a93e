"""The handle's store over a long synthetic run: memory stays flat, figures stay right."""

from __future__ import annotations

import gc
import tracemalloc
from array import array

import numpy as np
import pytest

from tui.engine.aggregate import lanes as lanes_mod
from tui.engine.aggregate import levels as levels_mod
from tui.engine.aggregate import series as series_mod
from tui.engine.aggregate.store import Store
from tui.engine.config import LoadTarget
from tui.engine.load.arrival_counts import ArrivalCollector
from tui.engine.records import RequestRecord
from tui.engine.wire import Batch, Health, LaneDelta

S = 1_000_000_000
MS = 1_000_000


def _batch(worker: int, t_ns: int, first_id: int, n: int, level: int) -> Batch:
    """n finished requests ending at t_ns: TTFT 50 ms, 20 chunks 10 ms apart, 20 tokens (usage); their
    arrivals as a worker counts them (`ArrivalCollector`)."""
    records = []
    arrivals = ArrivalCollector()
    for k in range(n):
        sent = t_ns - 300 * MS - k * MS
        chunks = array("q", [sent + 50 * MS + i * 10 * MS for i in range(20)])
        rec = RequestRecord(
            request_id=first_id + k,
            worker=worker,
            seq=first_id + k,
            level_id=level,
            sent_ns=sent,
            first_byte_ns=sent + 40 * MS,
            first_content_ns=chunks[0],
            end_ns=chunks[-1],
            chunk_ns=chunks,
            input_tokens=100,
            input_source="usage",
            output_tokens=20,
            output_source="usage",
        )
        records.append(rec)
        arrivals.note(level, sent, None, chunks.tobytes(), None)
    # lanes: streaming text of requests that finish in this same batch (the worker sends the last text first)
    lanes = [
        LaneDelta(first_id + k, level, t_ns - 300 * MS - k * MS, "tok " * 3, 3, None, b"", None)
        for k in range(5)
    ]
    return Batch(
        worker=worker,
        t_ns=t_ns,
        level_id=level,
        in_flight=5,
        lanes=lanes,
        tokens=20 * n,
        records=records,
        health=Health(0.5, 0.2),
        notices=[],
        arrivals=arrivals.take(),
    )


# Not `heavy`: one core of pure CPU with no timing in it (the longest test of the heavy pass, 29 s at load
# 4-7), so it runs in the parallel pass instead of holding up the one that runs alone.
def test_memory_stays_flat_over_a_long_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(series_mod, "SERIES_CAP", 4096)
    monkeypatch.setattr(levels_mod, "LEVEL_REQUEST_CAP", 2000)
    monkeypatch.setattr(levels_mod, "LEVEL_GAP_CAP", 20_000)
    st = Store(0, workers=1)
    st.begin_level(1, LoadTarget(concurrency=50), 0)
    step_ns, last = 2 * S, 750  # 750 batches of 50 requests (1000 chunks) span 25 minutes

    def run(batches: range) -> None:
        for b in batches:
            st.ingest(_batch(0, b * step_ns, 1 + 50 * b, 50, 1))
        st.refresh_views(batches[-1] * step_ns)
        st.snapshot(
            batches[-1] * step_ns,
            base_url="u",
            model="m",
            endpoint="chat",
            demo=False,
            load=LoadTarget(),
            level_id=1,
            fatal=None,
        )

    run(range(1, 301))  # every ring and reservoir is full by now
    tracemalloc.start()
    try:
        run(range(301, 451))
        gc.collect()  # what is kept, not garbage a collection has not reached yet
        before = tracemalloc.get_traced_memory()[0]
        run(range(451, last + 1))  # 15,000 more requests, 300k more chunk gaps
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 300_000, (before, after)
    lv = st.levels[1]
    assert lv.req.size == 2000 and lv.req.seen == last * 50 and not lv.req.exact
    assert lv.gaps.size == 20_000
    assert lv.timeline.n == 4096 and lv.timeline.res_ns >= 400 * MS
    assert all(s.cap == 4096 for s in st.series.values())
    assert len(st.lanes.recent) == lanes_mod.RECENT_CAP and len(st.lanes.finished) <= 256
    assert st.lanes.recent_chunks == 20 * lanes_mod.RECENT_CAP
    assert st.lanes.live == {}  # every lane was finished by its record
    st.refresh_views(last * step_ns)
    snap = st.snapshot(
        last * step_ns,
        base_url="u",
        model="m",
        endpoint="chat",
        demo=False,
        load=LoadTarget(),
        level_id=1,
        fatal=None,
    )
    (view,) = snap.levels
    assert view.ttft.p50 == pytest.approx(50.0) and view.tpot.p50 == pytest.approx(10.0)
    assert view.itl_chunk.p50 == pytest.approx(10.0) and not view.exact
    # 50 requests x 20 tokens every 2 s of run
    assert view.output_tps == pytest.approx(500.0, rel=0.02)
    h = snap.itl_hist[("chunk", None)]
    # the rolling views are made of the workers' binned arrivals: each gap stands at its bin's middle
    assert h.stats.n == last * 50 * 19 and h.stats.mean == pytest.approx(10.0, rel=0.025)
    h10 = snap.ttft_hist[10.0]
    assert 250 <= h10.stats.n <= 300
    assert snap.completed == last * 50 and snap.health.cpu_share == pytest.approx(0.2)


def test_lanes_text_is_capped() -> None:
    st = Store(0, workers=1)
    st.begin_level(1, LoadTarget(), 0)
    for i in range(200):
        st.ingest(Batch(0, i * MS, 1, lanes=[LaneDelta(7, 1, 0, "x" * 1000, i, 5 * MS, b"", None)]))
    lane = st.lanes.live[7]
    assert lane.chars <= 2 * lanes_mod.TEXT_CAP and len(lane.text()) == lanes_mod.TEXT_CAP
    (view,), hidden = st.lane_views(200 * MS)
    assert hidden == 0 and len(view.text_tail) == lanes_mod.TEXT_TAIL and view.state == "streaming"
    assert np.isclose(view.ttft_ms or 0, 5.0)


def test_recent_records_are_bounded_by_chunks_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lanes_mod, "RECENT_CHUNKS", 1000)
    st = Store(0, workers=1)
    st.begin_level(1, LoadTarget(), 0)
    for b in range(1, 21):
        st.ingest(_batch(0, b * S, 1 + 50 * b, 50, 1))  # 20 chunks per request
    assert len(st.lanes.recent) == 50 and st.lanes.recent_chunks == 1000
    newest = max(st.lanes.recent)
    kept = st.detail(newest, 21 * S)
    assert kept is not None and len(kept.chunk_offsets_ms) == 20
    evicted = st.detail(min(st.lanes.recent) - 1, 21 * S)  # only its lane (text, TTFT) is left
    assert evicted is not None and evicted.chunk_offsets_ms == () and evicted.e2e_ms == pytest.approx(240.0)
    assert st.detail(1, 21 * S) is None  # long gone


def _health_batch(worker: int, t_ns: int, window: Health | None) -> Batch:
    """No requests: a rolling health reading and, when given, one closed health window's."""
    return Batch(worker, t_ns, 1, health=window or Health(0.5, 0.05), health_window=window)


def test_saturation_needs_two_consecutive_windows_over_a_threshold() -> None:
    """One noisy window (lag or CPU) does not flag; two in a row do; a clean window clears the live flag,
    while the run keeps the record that it happened (and the raw maxima, a moment's peak included)."""
    st = Store(0, workers=2, lag_threshold_ms=2.0, cpu_threshold=0.6)
    st.begin_level(1, LoadTarget(concurrency=4), 0)
    quiet, laggy, busy = Health(0.6, 0.07), Health(200.0, 0.3), Health(1.0, 0.9)

    def feed(worker: int, window: Health | None) -> bool:
        st.ingest(_health_batch(worker, st.worker_t[worker] + S, window))
        return st.health().saturated

    assert not feed(0, laggy)  # the start-up stall: one window
    assert not feed(0, None)  # rolling readings between windows do not count as windows
    assert not feed(0, quiet)
    assert not feed(0, busy)  # a CPU blip, one window
    assert not feed(1, busy)  # another worker's window does not continue this one's streak
    assert not st.saturated_ever
    assert st.max_lag_ms == 200.0 and st.max_cpu == 0.9  # raw maxima kept as measured
    assert feed(0, laggy)  # busy then laggy: over in two consecutive windows
    health = st.health()
    assert health.reason.startswith("load generator delayed (event-loop lag p99 200.0 ms")
    assert feed(0, busy) and st.health().reason.startswith("load generator saturated (a worker uses 90%")
    assert not feed(0, quiet)  # recovery clears it
    assert st.health().reason == ""
    assert st.saturated_ever


def test_snapshot_reads_the_published_views_and_only_a_refresh_recomputes_them() -> None:
    """The costly views are computed by `refresh_views` alone (the handle's reader thread) and published as
    one bundle: a snapshot reuses it however old, a refresh recomputes it once it is older than
    `heavy_interval_s` (or at once when a level begins or ends, or when forced)."""
    meta = dict(
        base_url="u", model="m", endpoint="chat", demo=False, load=LoadTarget(), level_id=1, fatal=None
    )
    st = Store(0, workers=1, heavy_interval_s=0.5)
    st.begin_level(1, LoadTarget(concurrency=5), 0)
    st.ingest(_batch(0, 1 * S, 1, 5, 1))
    first = st.refresh_views(1 * S)
    st.ingest(_batch(0, 1 * S + 100 * MS, 6, 5, 1))
    assert st.refresh_views(1 * S + 400 * MS) is first  # not due yet: the same bundle
    later = 1 * S + 600 * MS  # past heavy_interval_s
    reused = st.snapshot(later, **meta)
    assert reused.ttft_hist[None].stats.n == 5 and reused.levels[0].completed == 5
    st.refresh_views(later)
    fresh = st.snapshot(later, **meta)
    assert fresh.ttft_hist[None].stats.n == 10 and fresh.levels[0].completed == 10
    st.ingest(_batch(0, 2 * S, 11, 5, 1))
    stale = st.snapshot(3 * S + 700 * MS, **meta)  # nobody refreshed: still the published bundle
    assert stale.ttft_hist[None].stats.n == 10
    ((view, _extra),) = st.level_views(3 * S + 700 * MS, force=True)  # the results' forced refresh
    assert view.completed == 15 and st.snapshot(3 * S + 700 * MS, **meta).ttft_hist[None].stats.n == 15
    st.begin_level(2, LoadTarget(concurrency=6), 3 * S + 800 * MS)  # a new level: due at once
    assert [v.level_id for v in st.refresh_views(3 * S + 800 * MS).levels] == [1, 2]


def test_saturated_spans_open_when_a_worker_is_flagged_and_close_when_none_is() -> None:
    st = Store(0, workers=2, lag_threshold_ms=2.0, cpu_threshold=0.6)
    st.begin_level(1, LoadTarget(concurrency=2), 0)

    def window(w: int, t_s: float, lag_ms: float) -> None:
        st.ingest(Batch(w, int(t_s * S), 1, health_window=Health(lag_ms, 0.1)))

    window(0, 2, 5.0)  # one over window: not yet
    window(1, 2, 5.0)
    assert st.saturated_spans == []
    window(0, 4, 5.0)  # worker 0: two in a row
    window(1, 4, 5.0)  # worker 1 too: still one span
    window(0, 6, 0.5)  # worker 0 clears, worker 1 still saturated
    assert st.saturated_spans == [[4.0, None]]
    window(1, 6, 0.5)
    assert st.saturated_spans == [[4.0, 6.0]] and st.saturated_ever
    window(1, 8, 9.0)
    window(1, 10, 9.0)
    assert st.saturated_spans == [[4.0, 6.0], [10.0, None]]


def _stream_deltas(rid: int, sent_ns: int, n_chunks: int, per_batch: int, *, counts: bool) -> list[LaneDelta]:
    """Worker lane deltas of one stream: a chunk every 10 ms from sent + 50 ms, ``per_batch`` per delta,
    two tokens each when the server counts them."""
    stamps = array("q", [sent_ns + 50 * MS + i * 10 * MS for i in range(n_chunks)])
    out: list[LaneDelta] = []
    for lo in range(0, n_chunks, per_batch):
        hi = min(lo + per_batch, n_chunks)
        new_counts = array("q", [2] * (hi - lo)).tobytes() if counts else None
        tokens = 2 * hi if counts else hi
        out.append(
            LaneDelta(
                rid, 1, sent_ns, "ab" * (hi - lo), tokens, stamps[0], stamps[lo:hi].tobytes(), new_counts
            )
        )
    return out


def test_in_flight_detail_has_the_timeline_so_far() -> None:
    st = Store(0, workers=1)
    st.begin_level(1, LoadTarget(), 0)
    deltas = _stream_deltas(9, 1 * S, 30, 7, counts=True)
    for k, delta in enumerate(deltas[:3]):  # 21 chunks in so far
        st.ingest(Batch(0, 2 * S + k * MS, 1, lanes=[delta]))
    d = st.detail(9, 3 * S)
    assert d is not None and d.state == "streaming" and d.e2e_ms is None and d.chunks_dropped == 0
    assert d.chunk_offsets_ms == pytest.approx([50.0 + 10.0 * i for i in range(21)])
    assert d.chunk_tokens == (2,) * 21 and d.output_tokens == 42 and d.token_source == "usage"
    assert d.itl_chunk.n == 20 and d.itl_chunk.p50 == pytest.approx(10.0)
    assert d.ttft_ms == pytest.approx(50.0)
    assert d.tpot_ms == pytest.approx(200.0 / 41)  # 200 ms between first and latest chunk, 41 tokens after it
    # the server stops counting per chunk: one token per chunk from then on
    st.ingest(Batch(0, 2 * S + 3 * MS, 1, lanes=[deltas[3]._replace(tokens=49, chunk_tokens=None)]))
    d = st.detail(9, 3 * S)
    assert d is not None and len(d.chunk_offsets_ms) == 28
    assert d.chunk_tokens == (1,) * 28 and d.token_source == "chunks"


def test_in_flight_chunk_stamps_are_capped_per_lane() -> None:
    cap = lanes_mod.LANE_CHUNKS
    st = Store(0, workers=1)
    st.begin_level(1, LoadTarget(), 0)
    n_lanes, n_chunks = 200, 3 * cap + 123
    streams = [_stream_deltas(rid, rid * MS, n_chunks, 250, counts=True) for rid in range(1, n_lanes + 1)]
    for b, batch_deltas in enumerate(zip(*streams, strict=True)):
        st.ingest(Batch(0, 100 * S + b * 100 * MS, 1, lanes=list(batch_deltas)))
        # bounded all along: the latest LANE_CHUNKS plus at most a quarter more between trims
        assert max(len(ln.chunk_ns) for ln in st.lanes.live.values()) <= cap + cap // 4
    kept = sum(len(ln.chunk_ns) + len(ln.chunk_tokens or ()) for ln in st.lanes.live.values()) * 8
    assert kept <= n_lanes * 2 * 8 * (cap + cap // 4)  # about 16 MB at most for 200 long outputs
    d = st.detail(7, 200 * S)
    assert d is not None and len(d.chunk_offsets_ms) == len(d.chunk_tokens) == cap
    assert d.chunks_dropped == n_chunks - cap
    first_kept = n_chunks - cap  # the latest chunks are the ones kept
    assert d.chunk_offsets_ms[0] == pytest.approx(50.0 + 10.0 * first_kept)
    assert d.chunk_offsets_ms[-1] == pytest.approx(50.0 + 10.0 * (n_chunks - 1))
    assert d.itl_chunk.n == cap - 1 and d.output_tokens == 2 * n_chunks
    assert d.ttft_ms == pytest.approx(50.0)  # from the first chunk ever, not the first kept
    # the finished record replaces the lane's stamps; its detail is the record's, whole
    chunks = array("q", [7 * MS + 50 * MS + i * 10 * MS for i in range(n_chunks)])
    rec = RequestRecord(
        request_id=7, worker=0, seq=7, level_id=1, sent_ns=7 * MS, first_content_ns=chunks[0],
        end_ns=chunks[-1] + MS, chunk_ns=chunks, output_tokens=2 * n_chunks, output_source="usage",
    )  # fmt: skip
    st.ingest(Batch(0, 300 * S, 1, records=[rec]))
    assert 7 not in st.lanes.live and len(st.lanes.finished[7].chunk_ns) == 0
    d = st.detail(7, 300 * S)
    assert d is not None and d.state == "ok" and len(d.chunk_offsets_ms) == n_chunks and d.chunks_dropped == 0


def test_worker_tasks_are_the_sum_of_each_workers_latest_window() -> None:
    """The soak benchmark reads `health.worker_tasks` to show no task leaks: each worker's count from its
    latest health window, summed (a rolling reading carries none and changes nothing)."""
    st = Store(0, workers=2)
    st.begin_level(1, LoadTarget(concurrency=2), 0)
    st.ingest(Batch(0, 1 * S, 1, health_window=Health(0.5, 0.1, 30)))
    st.ingest(Batch(1, 1 * S, 1, health_window=Health(0.5, 0.1, 12)))
    assert st.health().worker_tasks == 42
    st.ingest(Batch(0, 2 * S, 1, health=Health(0.5, 0.1)))
    st.ingest(Batch(0, 3 * S, 1, health_window=Health(0.5, 0.1, 20)))
    assert st.health().worker_tasks == 32


def test_chunks_that_came_in_one_read_are_counted_per_level() -> None:
    """Two chunks stamped alike (one read carried both) make a 0 ms ITL gap: each level counts them, so a
    p50 ITL of 0.00 ms reads as the client's reads, not the server's speed."""
    st = Store(0, workers=1)
    st.begin_level(1, LoadTarget(concurrency=5), 0)
    for b in range(1, 9):
        batch = _batch(0, b * S, 1 + 5 * b, 5, 1)
        for rec in batch.records:  # chunks 1-2 and 5-6 of each request in one read
            rec.chunk_ns[2], rec.chunk_ns[6] = rec.chunk_ns[1], rec.chunk_ns[5]
        st.ingest(batch)
    ((view, _extra),) = st.level_views(9 * S, force=True)
    assert view.steady and view.window_completed > 0
    assert view.itl_chunk.n == 19 * view.window_completed
    assert view.coalesced_gaps == 2 * view.window_completed and view.itl_chunk.p50 > 0


def test_the_client_limit_notices_are_the_levels_flags_at_the_time() -> None:
    """A level judged the client's early on (CPU-bound windows as it began) and not once its windows were
    quiet: the notices follow the flag (one source), no stale "client is the limit" line is left."""
    meta = dict(
        base_url="u", model="m", endpoint="chat", demo=False, load=LoadTarget(), level_id=1, fatal=None
    )
    st = Store(0, workers=1, heavy_interval_s=0.0)
    st.begin_level(1, LoadTarget(concurrency=4), 0)
    busy, quiet = Health(1.0, 0.9), Health(0.5, 0.05)
    for t_s in (1, 2):
        st.ingest(_health_batch(0, t_s * S, busy))
    st.refresh_views(2 * S)
    early = st.snapshot(2 * S, **meta)
    assert early.levels[0].client_limited and early.levels[0].client_limit_cause == "cpu"
    assert [n for n in st.notices_with(early.levels) if n.startswith("client is the limit at 4 users")]
    for t_s in range(3, 11):
        st.ingest(_health_batch(0, t_s * S, quiet))
    st.refresh_views(10 * S)
    late = st.snapshot(10 * S, **meta)
    assert not late.levels[0].client_limited and late.levels[0].client_lag_ms == 0.5
    assert not [n for n in (*st.notices, *st.notices_with(late.levels)) if "client is the limit" in n]
