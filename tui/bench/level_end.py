"""When a bench level has what it needs: its time of up-time, or its requests counted in its steady window
(or the trace is over, or it cannot settle)."""

from __future__ import annotations

import math

from tui.engine.snapshot import LevelView

UNSETTLED_AFTER_S = 5.0
"""A level that is not steady after 4x its request goal (+20) ends, unless it is younger than this: at a
fast server those requests finish within a second, before any steady window is long enough to measure
(`tui.engine.aggregate.levels.MIN_WINDOW_S`), and a level that was about to settle ended unsteady."""

TRACE_REQUESTS = 100
"""Requests per trace level by default (each level replays the trace from its start)."""


def default_requests(mode: str, value: float) -> int:
    """Requests per level when neither --requests nor --duration is given."""
    if mode == "concurrency":
        return max(20, 4 * int(value))
    if mode == "trace":
        return TRACE_REQUESTS  # the trace's rate is its own: --duration or --requests to say otherwise
    return max(20, math.ceil(5 * value))


def counted(lv: LevelView | None) -> bool:
    """The level's window counts toward its goal: steady, or over the server's up-time after an outage."""
    return lv is not None and (lv.steady or (lv.down_s > 0 and not lv.too_short))


def level_done(
    lv: LevelView,
    elapsed_s: float,
    duration_s: float | None,
    goal_requests: int,
    trace_requests: int | None,
    *,
    down: bool = False,
    waited_s: float = 0.0,
) -> bool:
    """The level has what it needs: its time, or its requests in the steady window. ``down``: the server is
    away now; ``waited_s``: how long it was away in this level (a timed level gets its time of up-time)."""
    if duration_s:
        return not down and elapsed_s - waited_s >= duration_s
    return (
        # over whole requests: an arrivals window counts the requests that ended in it, not those sent
        (
            counted(lv)
            and lv.measured_over == "requests"
            and lv.window_completed + lv.window_failed >= goal_requests
        )
        or (lv.completed == 0 and lv.failed >= goal_requests and not down)
        # the trace is over: nothing more will be sent at this speed
        or (trace_requests is not None and lv.completed + lv.failed >= trace_requests)
        # a level that cannot settle (e.g. the server started failing midway) still ends
        or (
            lv.completed + lv.failed >= 4 * goal_requests + 20 and elapsed_s >= UNSETTLED_AFTER_S and not down
        )
    )
