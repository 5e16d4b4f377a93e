"""`Store.lose_workers`: a lost node's workers stop holding the level views back, their in-flight requests
become cancelled ``node_lost`` records, and the level's window ends at the loss."""

from __future__ import annotations

from array import array

from tui.engine.aggregate.store import Store
from tui.engine.config import LoadTarget
from tui.engine.records import RequestRecord
from tui.engine.wire import Batch, LaneDelta

S = 1_000_000_000
MS = 1_000_000
W = 2


def _done(rid: int, sent: int, level: int = 1) -> RequestRecord:
    chunks = array("q", [sent + 50 * MS + i * 10 * MS for i in range(10)])
    return RequestRecord(
        request_id=rid, worker=(rid - 1) % W, seq=(rid - 1) // W, level_id=level, sent_ns=sent,
        first_content_ns=chunks[0], end_ns=chunks[-1], chunk_ns=chunks, output_tokens=10,
        output_source="usage",
    )  # fmt: skip


def _run() -> Store:
    """Two workers: worker 1 last heard at 3 s with requests 2 and 4 in flight (sent at 2.5 and 2.6 s) and
    one more it had no lane budget for; worker 0 reports up to 8 s and finishes a request every 100 ms."""
    st = Store(0, W)
    st.begin_level(1, LoadTarget(concurrency=4), 0)
    st.ingest(Batch(worker=1, t_ns=10 * MS, level_id=1, level_at_ns=10 * MS))
    lanes = [
        LaneDelta(2, 1, 2_500 * MS, "a", 1, None, b"", None),
        LaneDelta(4, 1, 2_600 * MS, "b", 1, None, b"", None),
    ]
    st.ingest(Batch(worker=1, t_ns=3 * S, level_id=1, in_flight=3, lanes=lanes))
    rid = 1
    for k in range(80):
        t = 100 * MS * (k + 1)
        st.ingest(
            Batch(
                worker=0, t_ns=t, level_id=1, level_at_ns=0, in_flight=1, records=[_done(rid, t - 200 * MS)]
            )
        )
        rid += 2
    return st


def test_a_lost_worker_no_longer_holds_the_horizon_and_its_in_flight_become_node_lost() -> None:
    st = _run()
    before = st.refresh_views(8 * S, force=True).levels[0]
    # worker 1's last batch (3 s) and its in-flight sends (2.5 s) hold the window back
    assert before.window_to_s is not None and before.window_to_s <= 2.5
    in_flight, records = st.lose_workers([1], 7 * S)
    assert in_flight == 3  # what worker 1 last reported: 2 lanes known, 1 not
    assert [(r.request_id, r.status, r.error_class) for r in records] == [
        (2, "cancelled", "node_lost"),
        (4, "cancelled", "node_lost"),
    ]
    assert st.worker_in_flight[1] == 0 and st.in_flight() == 1
    assert st.cancelled == 3 and st.levels[1].cancelled == 3
    assert not st.lanes.live  # none of the lost lanes is shown as in flight any more
    after = st.refresh_views(8 * S, force=True).levels[0]
    assert after.workers_lost == 1
    # the window still ends before the lost requests' sends: their chunks were never all known
    assert after.window_to_s is not None and after.window_to_s <= 2.5
    # losing the same worker again changes nothing
    assert st.lose_workers([1], int(7.5 * S)) == (0, [])


def test_the_horizon_and_acked_come_from_the_survivors_and_the_window_ends_at_the_loss() -> None:
    st = Store(0, W)
    st.begin_level(1, LoadTarget(concurrency=2), 0)
    st.ingest(Batch(worker=1, t_ns=10 * MS, level_id=1, level_at_ns=10 * MS))
    rid = 1
    for k in range(100):
        t = 100 * MS * (k + 1)
        st.ingest(Batch(worker=0, t_ns=t, level_id=1, level_at_ns=0, records=[_done(rid, t - 200 * MS)]))
        rid += 2
    held = st.refresh_views(10 * S, force=True).levels[0]
    assert held.window_to_s is not None and held.window_to_s <= 0.1  # worker 1 silent since 10 ms
    st.lose_workers([1], 6 * S)  # nothing in flight there: only the horizon held the window back
    freed = st.refresh_views(10 * S, force=True).levels[0]
    assert freed.window_to_s is not None and 5.5 <= freed.window_to_s <= 6.0  # ends at the loss
    assert freed.steady and freed.workers_lost == 1
    # a level begun after the loss is acked by the survivor alone, so it can become steady
    st.begin_level(2, LoadTarget(concurrency=1), 10 * S)
    for k in range(60):
        t = 10 * S + 100 * MS * (k + 1)
        st.ingest(
            Batch(worker=0, t_ns=t, level_id=2, level_at_ns=10 * S, records=[_done(rid, t - 200 * MS, 2)])
        )
        rid += 2
    level2 = st.refresh_views(16 * S, force=True).levels[1]
    assert level2.steady and level2.workers_lost == 0


def test_without_the_loss_a_silent_worker_keeps_the_next_level_unacked() -> None:
    """The control for the test above: the same run without `lose_workers` never gets level 2 steady."""
    st = Store(0, W)
    st.begin_level(1, LoadTarget(concurrency=2), 0)
    st.ingest(Batch(worker=1, t_ns=10 * MS, level_id=1, level_at_ns=10 * MS))
    st.begin_level(2, LoadTarget(concurrency=1), 10 * S)
    rid = 1
    for k in range(60):
        t = 10 * S + 100 * MS * (k + 1)
        st.ingest(
            Batch(worker=0, t_ns=t, level_id=2, level_at_ns=10 * S, records=[_done(rid, t - 200 * MS, 2)])
        )
        rid += 2
    assert not st.refresh_views(16 * S, force=True).levels[1].steady
