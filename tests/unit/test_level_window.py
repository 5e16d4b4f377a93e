"""A level's window once it has ended: its start is fixed by what was known at the load change, so requests
of the level that end later (slower, under the next load) cannot move it. And its prefix-cache hit rate."""

from __future__ import annotations

from array import array

from tui.engine.aggregate.levels import LevelAgg, LevelContext, fold_ok, level_view, ok_columns
from tui.engine.config import LoadTarget
from tui.engine.records import RequestRecord

S = 1_000_000_000
MS = 1_000_000


def _record(rid: int, sent_ns: int, e2e_ns: int, cached: int | None = None) -> RequestRecord:
    chunks = array("q", [sent_ns + e2e_ns // 2, sent_ns + e2e_ns])
    return RequestRecord(
        request_id=rid, worker=0, seq=rid, level_id=1, sent_ns=sent_ns, first_content_ns=chunks[0],
        end_ns=chunks[-1], chunk_ns=chunks, input_tokens=10, input_source="usage", output_tokens=2,
        output_source="usage", cached_tokens=cached,
    )  # fmt: skip


def _add(lv: LevelAgg, recs: list[RequestRecord]) -> None:
    for rec in recs:
        lv.count(rec)
    fold_ok(ok_columns(recs), {1: lv})


def _ctx(now_ns: int, in_flight_sent: list[int]) -> LevelContext:
    return LevelContext(
        now_ns=now_ns, horizon_ns=now_ns, in_flight=len(in_flight_sent),
        oldest_in_flight_ns=min(in_flight_sent, default=None), earlier_in_flight=0,
        earlier_last_end_ns=None, acked=True,
    )  # fmt: skip


def test_an_ended_levels_window_start_does_not_follow_its_late_requests() -> None:
    lv = LevelAgg(1, LoadTarget(concurrency=4), start_ns=0)
    lv.applied_ns[0] = 0
    # 20 requests of 500 ms sent in the first 10 s, then the load changes at 10 s with 24 requests in flight
    _add(lv, [_record(k, k * 500 * MS, 500 * MS) for k in range(20)])
    lv.end_ns = 10 * S
    late_sent = [9 * S + k * 25 * MS for k in range(24)]
    before, _ = level_view(lv, _ctx(11 * S, late_sent), 0, None, None)
    assert before.steady and before.steady_from_s == 0.5
    # they end 20 s later under the next level's load: the median E2E of the level is now theirs
    _add(lv, [_record(100 + k, sent, 20 * S) for k, sent in enumerate(late_sent)])
    after, _ = level_view(lv, _ctx(40 * S, []), 0, None, None)
    assert after.steady_from_s == before.steady_from_s == 0.5
    assert after.window_from_s == before.window_from_s
    assert after.steady and after.window_completed >= before.window_completed
    assert after.window_to_s == 10.0  # the window reaches the load change now that nothing is in flight


def test_a_running_levels_start_still_follows_its_median() -> None:
    lv = LevelAgg(1, LoadTarget(concurrency=4), start_ns=0)
    _add(lv, [_record(k, k * 500 * MS, 500 * MS) for k in range(20)])
    early, _ = level_view(lv, _ctx(11 * S, []), 0, None, None)
    _add(lv, [_record(100 + k, 9 * S, 20 * S) for k in range(30)])
    later, _ = level_view(lv, _ctx(40 * S, []), 0, None, None)
    assert early.steady_from_s == 0.5 and later.steady_from_s == 20.0


def test_the_hit_rate_counts_only_requests_that_reported_cached_tokens() -> None:
    lv = LevelAgg(1, LoadTarget(concurrency=4), start_ns=0)
    _add(lv, [_record(k, k * 500 * MS, 500 * MS) for k in range(20)])
    lv.end_ns = 10 * S
    silent, _ = level_view(lv, _ctx(11 * S, []), 0, None, None)
    assert silent.cached_tokens is None and silent.cache_hit_rate is None  # never reported: not 0
    lv = LevelAgg(1, LoadTarget(concurrency=4), start_ns=0)
    cached_of = [10, 0, None]  # all 10 prompt tokens cached, none, or the server did not say
    _add(lv, [_record(k, k * 400 * MS, 400 * MS, cached_of[k % 3]) for k in range(24)])
    lv.end_ns = 10 * S
    view, _ = level_view(lv, _ctx(11 * S, []), 0, None, None)
    assert view.window_from_s is not None and view.window_to_s is not None
    sent = [k for k in range(24) if view.window_from_s * S <= k * 400 * MS < view.window_to_s * S]
    hits, said = sum(k % 3 == 0 for k in sent), sum(k % 3 < 2 for k in sent)
    assert said >= 10 and view.cached_tokens == 10 * hits and view.cache_hit_rate == hits / said
