"""A level's server figures: computed from only the scrapes around its window (the same numbers as from the
whole ring), and kept once the level has ended, after the ring has dropped its scrapes."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import pytest

import tui.engine.server_metrics.view as view_module
from tests.support import frozen
from tui.engine.server_metrics.kinds import VLLM
from tui.engine.server_metrics.level_figures import LevelFigures, LevelSpan, level_spans_ns
from tui.engine.server_metrics.parse import Buckets
from tui.engine.server_metrics.view import Hold, Reading, ServerView, build_view, gauge_mean, with_areas
from tui.engine.server_metrics.window import time_weighted_mean

S = 1_000_000_000
EDGES = (0.05, 0.2, 1.0, float("inf"))


def _readings(n: int, *, start_s: float = 0.0, seed: int = 0) -> tuple[Reading, ...]:
    """n scrapes about a second apart, with gauges, growing counters and a growing histogram."""
    rng = random.Random(seed)
    out = []
    t_ns = int(start_s * S)
    tokens = 0.0
    cumulative = [0.0] * len(EDGES)
    for _ in range(n):
        t_ns += int(rng.uniform(0.8, 1.2) * S)
        tokens += rng.uniform(50, 150)
        grown = [rng.uniform(0, 3) for _ in EDGES]
        running = 0.0
        for i, g in enumerate(grown):
            running += g
            cumulative[i] += running
        out.append(
            Reading(
                t_ns,
                {
                    "running": float(rng.randint(0, 8)),
                    "waiting": float(rng.randint(0, 4)),
                    "kv_usage": rng.random(),
                },
                {"vllm:generation_tokens_total": tokens, "vllm:num_preemptions_total": 0.0},
                {"ttft_s": Buckets(EDGES, tuple(cumulative), sum(cumulative) * 0.1)},
            )
        )
    return tuple(out)


def _view(readings: tuple[Reading, ...]) -> ServerView:
    return build_view(ServerView(kind=VLLM, window_s=10.0), readings, "m")


def test_figures_from_the_scrapes_around_a_window_equal_those_from_the_whole_ring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    readings = _readings(200)
    view = _view(readings)
    times = [r.t_ns for r in readings]
    rng = random.Random(1)
    windows = [(times[0] - S, times[-1] + S), (times[5], times[5]), (times[3], times[9]), (0, times[0] - 1)]
    windows += [(times[-1] + 1, times[-1] + 5 * S), (times[10] + 1, times[10] + 2)]
    for _ in range(60):
        a, b = sorted(rng.randint(times[0] - 2 * S, times[-1] + 2 * S) for _ in range(2))
        windows.append((a, b))
    sliced = [(view.gauge_means(a, b), view.level_summary(a, b)) for a, b in windows]
    monkeypatch.setattr(view_module, "around", lambda readings, a, b: readings)  # the whole ring, as before
    whole = [(view.gauge_means(a, b), view.level_summary(a, b)) for a, b in windows]
    assert sliced == whole
    assert any(s[1]["running_mean"] is not None and s[1]["ttft_ms"]["count"] for s in sliced)


def _counting(
    compute_calls: list[tuple[int, int]],
) -> Callable[[ServerView, int, int], dict[str, float | None]]:
    def compute(view: ServerView, t_from: int, t_to: int) -> dict[str, float | None]:
        compute_calls.append((t_from, t_to))
        return view.gauge_means(t_from, t_to)

    return compute


def test_a_settled_level_keeps_its_figures_after_the_ring_has_dropped_its_scrapes() -> None:
    early = _readings(20)
    ended = LevelSpan(1, early[2].t_ns, early[10].t_ns, settled=True)
    running = LevelSpan(2, early[10].t_ns, early[-1].t_ns, settled=False)
    calls: list[tuple[int, int]] = []
    figures = LevelFigures(_counting(calls))
    first = figures.of(_view(early), [ended, running])
    assert first[1]["running"] is not None
    # The ring moves on: the first level's scrapes are gone, the second level still runs.
    later = _readings(20, start_s=early[-1].t_ns / S, seed=2)
    again = figures.of(_view(later), [ended, running])
    assert again[1] == first[1]  # kept, not computed from scrapes that are no longer there
    assert _view(later).gauge_means(ended.t_from_ns, ended.t_to_ns)["running"] is None
    assert calls.count((ended.t_from_ns, ended.t_to_ns)) == 1
    assert calls.count((running.t_from_ns, running.t_to_ns)) == 2  # a running level is computed anew


def test_a_level_is_kept_only_once_a_scrape_after_its_end_has_come() -> None:
    readings = _readings(10)
    span = LevelSpan(1, readings[2].t_ns, readings[-1].t_ns + S, settled=True)  # ended after the last scrape
    calls: list[tuple[int, int]] = []
    figures = LevelFigures(_counting(calls))
    figures.keep(_view(readings), [span])
    assert calls == []  # not ready: the last reading's hold is not known to have ended
    more = readings + _readings(3, start_s=readings[-1].t_ns / S + 1, seed=3)
    figures.keep(_view(more), [span])
    figures.keep(_view(more), [span])
    assert len(calls) == 1  # computed once, then kept
    assert figures.of(_view(more[-2:]), [span])[1] == _view(more).gauge_means(span.t_from_ns, span.t_to_ns)


def test_level_spans_are_the_steady_window_else_the_whole_span() -> None:
    base = frozen.LEVELS[0]
    steady = replace(
        base, level_id=1, started_s=0.0, ended_s=10.0, window_from_s=2.0, window_to_s=9.0, settled=True
    )
    ended = replace(steady, level_id=4, settled=False)  # its last requests are still out: not to be kept yet
    running = replace(base, level_id=2, started_s=10.0, ended_s=None, window_from_s=None, window_to_s=None)
    empty = replace(running, level_id=3, started_s=12.0)
    t0 = 100 * S
    spans = level_spans_ns([steady, ended, running, empty], t0, t0 + 12 * S)
    assert spans == [
        LevelSpan(1, t0 + 2 * S, t0 + 9 * S, True),
        LevelSpan(4, t0 + 2 * S, t0 + 9 * S, False),
        LevelSpan(2, t0 + 10 * S, t0 + 12 * S, False),
    ]


# --- the running areas the poller keeps -----------------------------------------------------------------


def _with_areas(readings: tuple[Reading, ...], *, drop_every: int = 0) -> tuple[Reading, ...]:
    """The readings as the poller stores them (`with_areas`); ``drop_every``: every n-th lacks its waiting
    gauge (a server that did not export it in that scrape)."""
    holds: dict[str, Hold] = {}
    out = []
    for i, r in enumerate(readings):
        if drop_every and i % drop_every == 0:
            r = replace(r, gauges={k: v for k, v in r.gauges.items() if k != "waiting"})
        out.append(with_areas(r, holds))
    return tuple(out)


@pytest.mark.parametrize("drop_every", [0, 7])
def test_a_mean_from_running_areas_is_the_point_by_point_mean(drop_every: int) -> None:
    """Over any window, in the whole ring and in one that has dropped its first half (the areas' origin
    is gone, their differences hold), with a gauge missing from some scrapes (fallen back, or carried)."""
    readings = _with_areas(_readings(400, seed=4), drop_every=drop_every)
    rng = random.Random(5)
    for ring in (readings, readings[200:]):
        times = [r.t_ns for r in ring]
        windows = [(times[3], times[3]), (times[0] - S, times[0] - 1), (times[0] - S, times[-1] + S)]
        windows += [(times[10], times[10] + 1), (times[-1] + 1, times[-1] + 9 * S)]
        for _ in range(200):
            a, b = sorted(rng.randint(times[0] - 3 * S, times[-1] + 3 * S) for _ in range(2))
            windows.append((a, b))
        for a, b in windows:
            for signal in ("running", "waiting", "kv_usage"):
                points = [(r.t_ns, r.gauges[signal]) for r in ring if signal in r.gauges]
                expected = time_weighted_mean(points, a, b)
                got = gauge_mean(ring, signal, a, b)
                assert (got is None) == (expected is None), (signal, a, b)
                if got is not None and expected is not None:
                    # the area to a thousandth of a value-nanosecond (a window of a few ns is all rounding)
                    span = max(b - max(a, ring[0].t_ns), 1)
                    assert got == pytest.approx(expected, rel=1e-9, abs=1e-3 / span), (signal, a, b)


def test_the_areas_are_carried_over_a_scrape_without_the_gauge() -> None:
    holds: dict[str, Hold] = {}
    a = with_areas(Reading(0, {"running": 2.0}, {}, {}), holds)
    b = with_areas(Reading(1 * S, {}, {}, {}), holds)  # not exported in this scrape: held, not dropped
    c = with_areas(Reading(3 * S, {"running": 6.0}, {}, {}), holds)
    assert (a.areas["running"], "running" in b.areas, c.areas["running"]) == (0.0, False, 2.0 * 3 * S)
    ring = (a, b, c)
    assert gauge_mean(ring, "running", 0, 4 * S) == pytest.approx((2.0 * 3 + 6.0 * 1) / 4)
    assert gauge_mean(ring, "running", 1 * S, 2 * S) == 2.0  # b lacks it: a's reading holds through
    assert gauge_mean(ring, "running", 2 * S, 4 * S) == pytest.approx((2.0 * 1 + 6.0 * 1) / 2)
    by_hand = tuple(replace(r, areas={}) for r in ring)  # no areas: point by point, the same
    assert gauge_mean(by_hand, "running", 0, 4 * S) == gauge_mean(ring, "running", 0, 4 * S)
    assert gauge_mean(ring, "kv_usage", 0, 4 * S) is None  # not exported at all
    with pytest.raises(ValueError, match="before"):
        gauge_mean(ring, "running", 2 * S, 1 * S)


def test_a_levels_preemptions_are_its_counters_increase_across_a_restart() -> None:
    """A rare event's rate rounds to 0/s: the level keeps how many (``preemptions``), a drop of the counter
    counted from zero (a restarted server)."""
    counts = [0.0, 2.0, 2.0, 5.0, 1.0, 3.0]  # 2 + 3, then the server restarted and preempted 1 + 2
    readings = tuple(Reading(i * S, {}, {"vllm:num_preemptions_total": c}, {}) for i, c in enumerate(counts))
    view = _view(readings)
    summary = view.level_summary(0, 5 * S)
    assert summary["preemptions"] == 8.0 and summary["preemptions_per_s"] == pytest.approx(8 / 5)
    assert view.level_summary(S, 3 * S)["preemptions"] == 3.0
    assert view.level_summary(S, S)["preemptions"] is None  # one scrape: no increase to tell
    assert ServerView(kind="unknown").level_summary(0, S)["preemptions"] is None
