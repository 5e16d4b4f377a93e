"""Which in-flight requests a worker sends full lane deltas for."""

from __future__ import annotations

from tui.engine.load.lane_budget import in_budget, lane_budget


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
