"""`tokentop bench`'s printed level table: a prefix-cache column once some level's server reported one."""

from __future__ import annotations

from dataclasses import replace

from tests.support import frozen
from tui.bench.table import format_table


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


def test_the_servers_counters_fill_in_the_hit_rate_and_a_warm_level_is_marked() -> None:
    """A server that gives no ``cached_tokens`` per request still has its counters' rate; a level whose
    unshared prompts hit the cache says "warm" after it (`LevelView.warm_cache`), as the app's column."""
    from tui.app.widgets.level_table import cache_cell

    first, second, *rest = (replace(lv, cache_hit_rate=None) for lv in frozen.snapshot().levels)
    levels = (replace(first, warm_cache=True, cache_hit_rate=0.93), second, *rest)
    by_counters = {second.level_id: 0.5}
    header, rows = _header_and_rows(format_table(levels, by_counters))
    assert "prefix cache" in header
    assert rows[0].split()[-3:-1] == ["93%", "warm"]
    assert rows[1].split()[-2] == "50%"  # by the server's counters
    assert cache_cell(levels[0]) == "93% warm"
    assert cache_cell(second, {"prefix_cache_hit_rate": 0.5}) == "50%"
    assert cache_cell(second) == "-"
