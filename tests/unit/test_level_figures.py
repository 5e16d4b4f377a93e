"""A level's server figures: computed from only the scrapes around its window (the same numbers as from the
whole ring), and kept once the level has ended, after the ring has dropped its scrapes."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import pytest

import tui.engine.server_metrics.view as view_module
from tests.app import frozen
from tui.engine.server_metrics.kinds import VLLM
from tui.engine.server_metrics.level_figures import LevelFigures, LevelSpan, level_spans_ns
from tui.engine.server_metrics.parse import Buckets
from tui.engine.server_metrics.view import Reading, ServerView, build_view

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
