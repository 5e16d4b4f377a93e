"""`tokentop bench`'s printed level table: a prefix-cache column once some level's server reported one, a
price column and line with --cost-per-hour."""

from __future__ import annotations

from dataclasses import replace

from tests.support import frozen
from tui import units
from tui.bench.table import format_table, summary
from tui.engine.aggregate.run_noise import wilson_interval
from tui.engine.config import EngineOptions
from tui.engine.snapshot import SloView


def _header_and_rows(text: str) -> tuple[str, list[str]]:
    lines = text.splitlines()
    return lines[0], lines[2 : 2 + len(frozen.snapshot().levels)]


def test_no_prefix_cache_column_when_no_level_reported_one() -> None:
    levels = tuple(replace(lv, cache_hit_rate=None) for lv in frozen.snapshot().levels)
    header, _ = _header_and_rows(format_table(levels))
    assert "prefix cache" not in header


def test_the_prefix_cache_hit_rate_is_a_column_before_steady() -> None:
    first, *rest = (replace(lv, cache_hit_rate=None) for lv in frozen.snapshot().levels)
    levels = (replace(first, cache_hit_rate=0.889), *rest)
    header, rows = _header_and_rows(format_table(levels))
    assert header.split()[-3:] == ["prefix", "cache", "steady"]
    assert rows[0].split()[-2] == "89%"
    assert all(row.split()[-2] == "-" for row in rows[1:])  # a level whose server said nothing


def test_no_knee_from_the_clients_levels_says_the_client_was_the_limit() -> None:
    from tui.bench.table import summary

    levels = frozen.LEVELS
    limited = (*levels[:-1], replace(levels[-1], client_limited=True))
    text = summary(frozen.snapshot(levels=limited, knee=None))
    assert (
        "knee: not found among the server's levels (the client was the limit at 8 users; output throughput "
        "still rising at 4 users, the highest steady level)" in text
    )  # rising among the server's levels, not "at the highest level measured"


def test_the_fail_column_and_the_errors_line_say_which_requests_they_count() -> None:
    """The table's ``fail`` counts each level's steady window, the errors line the whole run: both say so,
    so 13 in the column and 16 on the line read as two populations, not a contradiction."""
    from tui.bench.table import summary

    levels = tuple(replace(lv, window_failed=k) for k, lv in enumerate(frozen.LEVELS))
    text = summary(frozen.snapshot(levels=levels, errors=(("disconnect", 10), ("http_429", 6))))
    header, rows = _header_and_rows(text)
    assert header.split()[2] == "fail" and [row.split()[2] for row in rows] == [
        str(k) for k in range(len(rows))
    ]
    assert "(over each level's steady window: done and fail count the requests sent in it;" in text
    line = "errors over the whole run, warm-up and wind-down included (16 failed): disconnect 10, http_429 6"
    assert line in text.splitlines()


def test_each_level_shows_its_timing_bound_and_marks_the_figures_it_is_material_to() -> None:
    """``± lag`` per level (``-`` until a health window covers it); ``*`` on a figure 20x it or under."""
    plain = [
        replace(lv, cache_hit_rate=None, reasoning_tokens=float("nan")) for lv in frozen.snapshot().levels
    ]
    first, second, *rest = plain
    levels = (
        replace(first, client_lag_ms=3.25, timing_uncertain=("itl_chunk_p50", "itl_chunk_p99")),
        replace(second, client_lag_ms=None, timing_uncertain=()),
        *rest,
    )
    text = format_table(levels)
    header, rows = _header_and_rows(text)
    assert header.split()[-4:] == ["±", "lag", "tok/chunk", "steady"]
    cells = rows[0].split()  # ..., ITL p50, ITL p99, E2E p50, ± lag, tok/chunk, steady
    assert cells[-3] == "3.2" and rows[1].split()[-3] == "-"
    assert cells[-6].endswith("*") and cells[-5].endswith("*") and not cells[-4].endswith("*")
    assert "*" not in rows[1] and "± lag: the client's timing bound" in text


def test_no_knee_names_the_levels_without_a_steady_window_instead_of_still_rising() -> None:
    """Against a slow real server the top levels may finish no request in their window: the curve is not
    "still rising" there (found against vLLM on 2 cores: 6, 6, -, 1 tok/s read "still rising")."""
    from tui.bench.table import summary

    one, two, *rest = (replace(lv, output_tps_ci=None) for lv in frozen.LEVELS)
    flat = replace(two, output_tps=one.output_tps)  # 1 and 2 users alike: the plateau, from 1 user
    top = [replace(lv, steady=False, output_tps=float("nan")) for lv in rest]
    text = summary(frozen.snapshot(levels=(one, flat, *top), knee=None))
    assert "still rising" not in text
    assert "knee: not found (no steady window at 4 users, 8 users: a longer --duration)" in text


def test_no_knee_while_the_best_is_the_highest_steady_level_says_still_rising() -> None:
    from tui.bench.table import summary

    levels = tuple(replace(lv, output_tps_ci=None) for lv in frozen.LEVELS[:2])  # 48 then 93 tok/s
    text = summary(frozen.snapshot(levels=levels, knee=None))
    assert "knee: not found (output throughput still rising at 2 users, the highest steady level)" in text


def test_with_a_price_each_level_has_its_dollars_per_million_tokens_after_out_tok_s() -> None:
    levels = frozen.snapshot().levels
    header, rows = _header_and_rows(format_table(levels, cost_per_hour=3.5))
    assert "out tok/s  $/Mtok out  TTFT p50" in header
    assert "$/Mtok" not in format_table(levels)
    at = header.split().index("$/Mtok") - 1  # "out tok/s" is two words: the column after tok/s
    for lv, row in zip(levels, rows, strict=True):
        assert row.split()[at] == units.dollars(3.5 / 3600 / lv.output_tps * 1e6)


def test_the_price_at_slo_is_the_capacity_levels_and_says_when_no_level_met_it() -> None:
    snap = frozen.snapshot()
    options = EngineOptions(slo_e2e_ms=1000.0, slo_target=0.9, cost_per_hour=3.5)
    assert "$/Mtok at SLO: - (no level's attainment had a 95 % lower bound of 90% or more)" in summary(
        snap, options
    )
    met = SloView(
        met=9, requests=9, cut=0, attainment=1.0, low=0.95, high=1.0, goodput_rps=1.0, goodput_tps=50.0
    )
    levels = (replace(snap.levels[0], slo=met), *snap.levels[1:])
    line = summary(replace(snap, levels=levels), options).splitlines()
    assert (
        f"$/Mtok at SLO: {units.dollars(3.5 / 3600 / 50.0 * 1e6)} at 1 user, the capacity at SLO"
        in "\n".join(line)
    )
    assert "$/Mtok at SLO" not in summary(snap, EngineOptions(cost_per_hour=3.5))  # no SLO: no such line


def test_joules_per_token_is_a_column_once_some_level_has_one() -> None:
    levels = frozen.snapshot().levels
    header, rows = _header_and_rows(format_table(levels, 3.5, joules={levels[0].level_id: 2.1049}))
    assert "out tok/s  $/Mtok out  J/tok  TTFT p50" in header
    assert [row.split()[8] for row in rows] == ["2.1"] + ["-"] * (len(rows) - 1)
    assert "J/tok" not in format_table(levels, joules={})


def test_an_embeddings_run_has_its_own_columns_in_bench_and_the_app() -> None:
    from tui.app.widgets.level_table import WHOLE_ANSWER_COLUMNS, level_cells
    from tui.bench.table import summary

    levels = tuple(
        replace(lv, output_tps=0.0, mean_isl=32.0, mean_osl=0.0, total_tps=5000.0) for lv in frozen.LEVELS
    )
    text = summary(frozen.snapshot(levels=levels, endpoint="embeddings"))
    header, rows = _header_and_rows(text)
    assert header.split() == [
        "level", "done", "fail", "ISL", "req/s", "in", "tok/s", "lat", "p50", "lat", "p90", "lat", "p99",
        "±", "lag", "steady",
    ]  # fmt: skip
    assert rows[0].split()[3:6:2] == ["32.0", "5,000"]  # ISL; input tok/s: the total less the (no) output
    assert "knee" not in text and "OSL" not in text
    assert "OSL" in summary(frozen.snapshot(levels=levels))  # a streamed API's table keeps its columns
    cells = level_cells(levels[0], 1, None, "chunk", whole_answers=True)
    assert (cells["tps"], cells["len"]) == ("5,000.0", "32")
    assert "ttft" not in dict(WHOLE_ANSWER_COLUMNS) and "itl" not in dict(WHOLE_ANSWER_COLUMNS)


def test_an_open_levels_sends_behind_their_schedule_are_said_under_the_table() -> None:
    """Rate levels too (not only a trace's) get their send lag under the table, and how far the sends fell
    behind their schedule where that is 1 % or more: the evidence of a client that could not send on time."""
    from tui.bench.table import summary

    on_time, late, closed = (replace(lv, mode="rate") for lv in frozen.LEVELS[:3])
    levels = (replace(on_time, send_shortfall=0.002), replace(late, send_shortfall=0.2), closed)
    (line,) = [ln for ln in summary(frozen.snapshot(levels=levels)).splitlines() if ln.startswith("send vs")]
    p50 = f"{on_time.sched_lag.p50:.2f}"
    assert f"r={on_time.value:g}/s p50 {p50} p99" in line and "(20% behind)" in line
    assert line.count("behind") == 1  # 0.2 % is no evidence; a level without the figure says nothing


def _slo(met: int, requests: int, goodput_tps: float) -> SloView:
    low, high = wilson_interval(met, requests)
    share = met / requests if requests else float("nan")
    return SloView(met, requests, 0, share, low, high, met / 10.0, goodput_tps)


def test_with_an_slo_the_table_has_its_column_and_the_capacity_at_it_is_said() -> None:
    """Beside tok/s: the share that met the SLO, its Wilson interval, goodput. Under the knee: the highest
    load whose lower bound met the target (2 users: 40 of 40 met, lower bound 91 %; 4 users' 38 of 40
    has a lower bound under 95 %, 1 user's is lower in load)."""
    from tui.bench.table import summary

    one, two, four, eight = frozen.LEVELS[:4]
    levels = (
        replace(one, slo=_slo(40, 40, 380.0)),
        replace(two, slo=_slo(120, 120, 760.0)),
        replace(four, slo=_slo(38, 40, 1_400.0)),
        replace(eight, slo=_slo(0, 0, float("nan"))),
    )
    text = summary(frozen.snapshot(levels=levels), EngineOptions(slo_target=0.95))
    header, rows = _header_and_rows(text)
    assert header.split()[7:13] == ["tok/s", "SLO", "met", "(95%", "CI)", "goodput"]
    low, high = wilson_interval(38, 40)
    assert f"95% ({low * 100:.0f}-{high * 100:.0f}) 1,400" in rows[2]
    assert rows[3].split()[7] == "-"  # no request yet
    assert (
        f"capacity at SLO: {two.value:g} users, 760 tok/s (the highest load whose attainment's 95 % lower"
        " bound met 95 %)" in text.splitlines()
    )
    assert "capacity at SLO: none of the levels" in summary(
        frozen.snapshot(levels=levels), EngineOptions(slo_target=0.999)
    )
    assert "SLO" not in format_table(frozen.LEVELS) and "capacity" not in summary(frozen.snapshot())


def test_the_servers_counters_fill_in_the_hit_rate_and_a_warm_level_is_marked() -> None:
    """A server that gives no ``cached_tokens`` per request still has its counters' rate; a level whose
    unshared prompts hit the cache says "warm" after it (`LevelView.warm_cache`), as the app's column."""
    from tui.app.widgets.level_table import cache_cell

    first, second, *rest = (replace(lv, cache_hit_rate=None) for lv in frozen.snapshot().levels)
    levels = (replace(first, warm_cache=True, cache_hit_rate=0.93), second, *rest)
    by_counters = {second.level_id: 0.5}
    header, rows = _header_and_rows(format_table(levels, server_hits=by_counters))
    assert "prefix cache" in header
    assert rows[0].split()[-3:-1] == ["93%", "warm"]
    assert rows[1].split()[-2] == "50%"  # by the server's counters
    assert cache_cell(levels[0]) == "93% warm"
    assert cache_cell(second, {"prefix_cache_hit_rate": 0.5}) == "50%"
    assert cache_cell(second) == "-"


def test_the_time_to_first_answer_column_is_for_levels_that_reasoned() -> None:
    """vLLM's Responses API reports 0 reasoning tokens for any model: no TTFA column for that, one as soon
    as some level's requests reasoned."""
    plain = [replace(lv, cache_hit_rate=None, reasoning_tokens=0.0) for lv in frozen.snapshot().levels]
    assert "TTFA" not in format_table(tuple(plain))
    plain[1] = replace(plain[1], reasoning_tokens=120.0)
    assert "TTFA p50" in format_table(tuple(plain))
