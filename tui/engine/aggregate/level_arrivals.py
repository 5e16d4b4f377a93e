"""A level measured from what arrived in it, for when its answers outlive the whole-request window.

`tui.engine.aggregate.levels.level_view` measures a level over the requests sent in a window that ends
before the oldest unfinished one: every figure is then over whole requests, as `vllm bench serve` counts
them. With answers longer than that window (reasoning models, thousands of tokens) the window is empty and
nothing would show. Then the level is measured over arrivals instead: its window runs from the arrivals'
steady start to the level's end (or the workers' horizon), and throughput, TTFT and chunk ITL count
everything that arrived in it, from finished and unfinished streams alike; E2E, TPOT and E2E/OSL, which
need whole requests, are over the requests that finished in it (``finished_in_window``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tui.engine.aggregate import metrics as m
from tui.engine.aggregate.attainment import slo_view
from tui.engine.aggregate.levels import (
    MIN_WINDOW_S,
    LevelAgg,
    LevelContext,
    _lengths,
    _median_e2e_ns,
    _prefix_cache,
    level_view,
)
from tui.engine.aggregate.series import Timeline
from tui.engine.snapshot import LevelView

LONG_ANSWER_S = 2.0
"""Answers at least this long (median E2E) are measured over arrivals until a whole-request window, which
needs about three of them, can be measured."""
STEADY_RULE = (
    "the arrivals' window starts once every request of an earlier level has ended, every user of the level "
    "has had a first token, and one median TTFT of the level has passed since it was applied"
)


def arrivals_steady_from(
    applied_ns: int,
    median_ttft_ms: float | None,
    users_started_ns: int | None,
    earlier_in_flight: int,
    earlier_last_end_ns: int | None,
) -> int | None:
    """Start of a level's arrivals window (`STEADY_RULE`): ``max(applied + median TTFT, all users' first
    token, last end of an earlier request)``; None while an earlier request is in flight or some user has
    had no token yet. No finished request of the level is needed."""
    if earlier_in_flight > 0 or users_started_ns is None or median_ttft_ms is None:
        return None
    start = max(applied_ns + int(median_ttft_ms * 1e6), users_started_ns)
    if earlier_last_end_ns is not None:
        start = max(start, earlier_last_end_ns)
    return start


def long_answers(median_e2e_ns: float | None) -> bool:
    """The level's answers are long for a whole-request window: none has finished yet (by the level's end,
    once it has ended), or their median E2E is `LONG_ANSWER_S` or more. Shorter answers wait for the
    whole-request window, which soon holds them."""
    return median_e2e_ns is None or median_e2e_ns >= LONG_ANSWER_S * 1e9


def over_requests(view: LevelView) -> bool:
    """The whole-request view measured something: its steady window holds a measurable span."""
    return (
        not view.too_short
        and view.steady_from_s is not None
        and view.window_from_s is not None
        and view.window_from_s >= view.steady_from_s - 1e-9
    )


def measure_level(
    lv: LevelAgg,
    ctx: LevelContext,
    t0_ns: int,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    slo_e2e_ms: float | None = None,
) -> tuple[LevelView, dict[str, Any]]:
    """A level's view: over whole requests when they fit its window, else over its arrivals."""
    view, extra = level_view(lv, ctx, t0_ns, slo_ttft_ms, slo_tpot_ms, slo_e2e_ms)
    unfinished = ctx.in_flight + lv.cancelled
    if over_requests(view) or not long_answers(_median_e2e_ns(lv.req.view(), lv.end_ns)):
        return replace(view, in_flight_at_end=unfinished, finished_in_window=view.window_completed), extra
    return arrivals_view(lv, ctx, view, t0_ns, slo_ttft_ms, slo_tpot_ms, slo_e2e_ms), extra


def arrivals_view(
    lv: LevelAgg,
    ctx: LevelContext,
    base: LevelView,
    t0_ns: int,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    slo_e2e_ms: float | None = None,
) -> LevelView:
    """``base`` (the whole-request view) with its window and figures taken from the level's arrivals."""
    applied = max([lv.start_ns, *lv.applied_ns.values()])
    steady_from = arrivals_steady_from(
        applied,
        lv.ttft_log.median_ms(),
        lv.users_started_ns,
        ctx.earlier_in_flight if ctx.acked else max(1, ctx.earlier_in_flight),
        ctx.earlier_last_end_ns,
    )
    end = ctx.now_ns if lv.end_ns is None else lv.end_ns
    if lv.lost_at_ns is not None:
        end = min(end, lv.lost_at_ns)  # a lost worker's arrivals stop there
    win_end = min(end, ctx.horizon_ns)
    in_window = steady_from is not None and steady_from < win_end
    tl = lv.timeline
    b0, b1 = tl.align(steady_from if steady_from is not None and in_window else applied, win_end)
    a_from, a_to = tl.edge_ns(b0), tl.edge_ns(b1)
    duration_s = (a_to - a_from) / 1e9
    measured = duration_s >= MIN_WINDOW_S and lv.first_token_count > 0  # no stream answered: nothing to rate
    nan = float("nan")

    def per_s(x: float) -> float:
        return x / duration_s if measured else nan

    tokens = tl.total(Timeline.TOK, b0, b1)
    partial = max(0.0, tokens - tl.total(Timeline.TOK_OK, b0, b1))
    ttft_from = a_from
    ttft = m.stats_from_counts(lv.ttft_log.fine(a_from, a_to))
    firsts = ttft.n  # the streams' first chunks inside the window
    if ttft.n == 0:
        ttft_from = min(a_from, lv.start_ns)
        ttft = m.stats_from_counts(lv.ttft_log.fine(ttft_from, a_to))
    gaps = m.stats_from_counts(lv.gap_log.fine(a_from, a_to))
    chunks = firsts + gaps.n
    per_chunk = tokens / chunks if chunks else nan
    rows = lv.req.view()
    fin = (rows["end_ns"] >= a_from) & (rows["end_ns"] < a_to)
    pick = {k: v[fin] for k, v in rows.items()}
    finished = int(fin.sum())
    in_tokens = round(float(pick["isl"].sum()))
    out_tokens = round(float(pick["osl"].sum()))
    failed = round(tl.total(Timeline.SENT_FAIL, b0, b1))
    objectives = (slo_ttft_ms, slo_tpot_ms, slo_e2e_ms)
    slo = slo_view(
        pick,
        ok=finished,
        failed=failed,
        cut=lv.cancelled,
        window_s=duration_s,
        measured=measured,
        slo=objectives,
    )
    return replace(
        base,
        steady_from_s=None if steady_from is None else (steady_from - t0_ns) / 1e9,
        steady=bool(in_window and measured),
        output_tps=per_s(tokens),
        request_per_s=per_s(tl.total(Timeline.END_OK, b0, b1)),
        per_request_tps=per_chunk * 1e3 / gaps.mean if gaps.n and gaps.mean > 0 else nan,
        ttft=ttft,
        itl_chunk=gaps,
        tpot=m.stats(pick["tpot_ms"]),
        itl_e2e=m.stats(pick["itl_e2e_ms"]),
        e2el=m.stats(pick["e2e_ms"]),
        tokens_per_chunk=per_chunk,
        sched_lag=m.stats(pick["sched_lag_ms"]),
        window_s=duration_s,
        window_from_s=(a_from - t0_ns) / 1e9,
        window_to_s=(a_to - t0_ns) / 1e9,
        window_completed=finished,
        window_failed=failed,
        input_tokens=in_tokens,
        output_tokens=out_tokens,
        total_tps=nan,  # the prompt tokens of unfinished streams are not known until their usage arrives
        goodput_per_s=None if slo is None else slo.goodput_rps,
        slo=slo,
        too_short=not measured,
        measured_over="arrivals",
        in_flight_at_end=ctx.in_flight + lv.cancelled,
        partial_output_tokens=round(partial),
        finished_in_window=finished,
        ttft_since_s=(ttft_from - t0_ns) / 1e9,
        **_lengths(pick, in_tokens, out_tokens, finished),
        **_prefix_cache(pick),
    )
