"""Which in-flight requests a worker sends full lane deltas for."""

from __future__ import annotations

from tui.engine.aggregate.store import Store
from tui.engine.config import LoadTarget
from tui.engine.load.lane_budget import in_budget, lane_budget
from tui.engine.wire import Batch, LaneDelta


def test_the_budget_is_twice_the_face_s_lanes_over_the_workers_and_at_least_four() -> None:
    assert lane_budget(64, 1) == 128
    assert lane_budget(64, 16) == 8
    assert lane_budget(64, 33) == 4  # ceil(128/33) = 4
    assert lane_budget(64, 1000) == 4
    assert lane_budget(10, 3) == 7  # ceil(20/3)


def test_only_the_oldest_are_sent_plus_the_oldest_of_each_level() -> None:
    levels = [1] * 6 + [2] * 3 + [3]
    assert in_budget(levels, 4) == [True] * 4 + [False, False] + [True, False, False] + [True]
    assert in_budget([], 4) == []
    assert all(in_budget([1] * 4, 4))


def test_the_face_counts_the_lanes_it_was_not_sent_as_hidden() -> None:
    """A worker with 10 in flight sends 4 lanes: the snapshot shows 4 and counts 6 more, not 0."""
    st = Store(0, 1, max_lanes=64)
    st.begin_level(1, LoadTarget(concurrency=10), 0)
    lanes = [LaneDelta(rid, 1, 1_000 + rid, "x", 1, None, b"", None) for rid in range(1, 5)]
    st.ingest(Batch(worker=0, t_ns=10**8, level_id=1, level_at_ns=0, in_flight=10, lanes=lanes))
    shown, hidden = st.lane_views(2 * 10**8)
    assert len(shown) == 4 and hidden == 6
    snap = st.snapshot(
        2 * 10**8, base_url="u", model="m", endpoint="chat", demo=False, load=LoadTarget(), level_id=1
    )
    assert snap.lanes_hidden == 6
