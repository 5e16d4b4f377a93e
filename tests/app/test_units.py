"""Pure pieces of the app, without a UI: key arithmetic, ramp policy, plot helpers, pane text."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from rich.style import Style

from tests.support import frozen
from tui.app import control
from tui.app.frames import FrameStats
from tui.app.plotting import CurveColours, HistColours, Plot, _position, nice_ticks
from tui.app.ramp_result import level_target, load_label, ramp_result, snapshot_knee_target
from tui.app.widgets.detail import chunk_timeline, detail_content
from tui.app.widgets.errors import errors_content
from tui.app.widgets.help import health_md
from tui.app.widgets.level_table import level_cells, slo_cell, triple
from tui.app.widgets.status import SATURATED_BADGE, UiState, status_lines, status_text
from tui.app.widgets.streams import lane_meta, tail_cells, visible_lanes
from tui.engine.aggregate.metrics import stats
from tui.engine.config import LoadTarget
from tui.engine.control.ramp import RampPolicy, RampStep
from tui.engine.snapshot import ClientHealth, Histogram, LaneView, RampStop, SloView, Snapshot, Stats


def NO_STYLE(_part: str) -> Style:
    return Style()


# --- load keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "up", "down"),
    [
        (1.0, 1.5, 0.5),
        (4.5, 5.0, 4.0),
        (5.0, 5.5, 4.5),
        (10.0, 11.0, 9.5),
        (20.0, 22.0, 19.0),
        (100.0, 110.0, 95.0),
    ],
)
def test_rate_steps_are_about_ten_percent_on_a_1_2_5_grid(rate: float, up: float, down: float) -> None:
    target = LoadTarget(mode="rate", rate=rate)
    assert control.step(target, 1).rate == up
    assert control.step(target, -1).rate == down


def test_concurrency_never_goes_below_one_user() -> None:
    one = LoadTarget(concurrency=1)
    assert control.step(one, -1).concurrency == 1
    assert control.scale(one, 0.5).concurrency == 1
    assert control.scale(LoadTarget(concurrency=3), 0.5).concurrency == 1
    assert control.scale(LoadTarget(concurrency=3), 2.0).concurrency == 6
    assert control.scale(LoadTarget(concurrency=4000), 2.0).concurrency == control.MAX_CONCURRENCY


def test_mode_switch_starts_rate_at_the_measured_rate_and_keeps_users() -> None:
    target = LoadTarget(concurrency=8, rate=1.0)
    as_rate = control.toggle_mode(target, measured_rate_per_s=12.3)
    assert as_rate.mode == "rate" and as_rate.rate == 12.0 and as_rate.concurrency == 8
    assert control.toggle_mode(as_rate, 0.0) == replace(as_rate, mode="concurrency")
    assert control.toggle_mode(target, 0.0).rate == 1.0
    assert (
        control.toggle_pause(target).paused and not control.toggle_pause(control.toggle_pause(target)).paused
    )


# --- plots ----------------------------------------------------------------------------------------


def test_position_interpolates_log_bins() -> None:
    edges = (1.0, 10.0, 100.0)
    assert _position(edges, 1.0) == 0.0
    assert _position(edges, 10.0) == 1.0
    assert _position(edges, 100.0) == pytest.approx(2.0)
    assert _position(edges, 10**0.5) == pytest.approx(0.5)


def test_nice_ticks_and_labels() -> None:
    assert nice_ticks(211, 2) == [0, 200]
    assert nice_ticks(125, 2) == [0, 100]
    assert nice_ticks(9, 3) == [0, 5]


def test_histogram_plot_marks_and_crops_to_decades() -> None:
    hist = frozen.snapshot().ttft_hist[10.0]
    colours = HistColours(bars=(1, 2, 3), marker=(4, 5, 6), axes=(7, 8, 9))
    text = Plot().histogram(hist, 60, 10, colours).plain
    assert "100ms" in text and "1.0s" in text and "10s" not in text
    assert "│" in text  # p50/p99 markers
    assert "no samples" in Plot().histogram(Histogram(), 60, 10, colours).plain


def test_curve_plot_has_each_level_and_the_knee() -> None:
    snap = frozen.snapshot()
    colours = CurveColours(
        total=(1, 1, 1), per_request=(2, 2, 2), current=(3, 3, 3), knee=(4, 4, 4), axes=(5, 5, 5)
    )
    text = Plot().curve(snap.levels, 4, 4.0, 60, 12, colours).plain
    assert "knee" in text
    assert all(label in text for label in ("1", "2", "4", "8"))


def test_with_an_slo_the_table_says_the_attainment_and_the_curve_draws_goodput() -> None:
    snap = frozen.snapshot()
    colours = CurveColours(
        total=(1, 1, 1), per_request=(2, 2, 2), current=(3, 3, 3), knee=(4, 4, 4), axes=(5, 5, 5)
    )
    slo = SloView(met=97, requests=100, cut=1, attainment=0.97, low=0.915, high=0.99, goodput_rps=9.7,
                  goodput_tps=40.5)  # fmt: skip
    levels = tuple(replace(lv, slo=slo) for lv in snap.levels)
    assert slo_cell(levels[0]) == "97% (92-99) 40.5"
    assert slo_cell(snap.levels[0]) == "-"
    without = Plot().curve(snap.levels, 4, 4.0, 60, 12, colours).plain
    with_slo = Plot().curve(levels, 4, 4.0, 60, 12, colours).plain
    assert "◦" not in without and "◦" in with_slo


def test_plots_do_not_share_plotext_state() -> None:
    colours = HistColours(bars=(1, 2, 3), marker=(4, 5, 6), axes=(7, 8, 9))
    a, b = Plot(), Plot()
    snap = frozen.snapshot()
    first = a.histogram(snap.ttft_hist[10.0], 50, 10, colours).plain
    b.histogram(snap.itl_hist[("chunk", 10.0)], 70, 14, colours)
    assert a.histogram(snap.ttft_hist[10.0], 50, 10, colours).plain == first


# --- pane text ------------------------------------------------------------------------------------


def test_status_names_target_load_and_demo() -> None:
    snap = frozen.snapshot()
    text = status_text(snap, UiState(target=snap.load), NO_STYLE).plain
    for part in (
        "http://127.0.0.1:8000/v1",
        "sim-llama-8b",
        "concurrency 8",
        "in flight 8",
        "done 148",
        "failed 2",
    ):
        assert part in text
    assert "198.7 tok/s" in text and "1.55 req/s" in text and "00:37" in text
    assert "demo: built-in simulator" in text
    assert "demo" not in status_text(replace(snap, demo=False), UiState(target=snap.load), NO_STYLE).plain


def test_status_badges_a_saturated_client_in_one_row() -> None:
    snap = frozen.snapshot(health=ClientHealth(saturated=True, reason="event loop lag p99 40 ms"))
    ui = UiState(target=LoadTarget(mode="rate", rate=2.5, paused=True), frames="ui 1.0 ms/tick")
    text = status_text(snap, ui, NO_STYLE).plain
    assert SATURATED_BADGE in text and "event loop lag" not in text  # the reason is in the help
    assert "rate 2.5/s" in text and "paused" in text
    lines = status_lines(snap, ui, NO_STYLE, width=60)
    third = "".join(chunk for chunk, _ in lines[2])
    assert SATURATED_BADGE in third and "ms/tick" not in third  # frame costs give way first
    assert len(third) <= 60
    narrow = "".join(chunk for chunk, _ in status_lines(snap, ui, NO_STYLE, width=30)[2])
    assert len(narrow) == 30 and narrow.endswith("…")
    wide = "".join(chunk for chunk, _ in status_lines(snap, ui, NO_STYLE, width=120)[2])
    assert SATURATED_BADGE in wide and "ui 1.0 ms/tick" in wide


def test_help_client_health_names_the_current_reason() -> None:
    assert "No measurement yet" in health_md(None)
    ok = health_md(ClientHealth(workers=2, loop_lag_p99_ms=1.5, cpu_share=0.4))
    assert "OK" in ok and "2 workers" in ok and "1.5 ms" in ok and "40%" in ok
    hot = health_md(ClientHealth(saturated=True, reason="a worker uses 97% of a core"))
    assert "saturated" in hot and "a worker uses 97% of a core" in hot


def test_lane_text_helpers() -> None:
    assert tail_cells("abcdef", 3) == "def"
    assert tail_cells("ab漢字", 4) == "漢字"
    assert tail_cells("ab漢字", 3) == "字"
    assert lane_meta(frozen.LANES[0]).startswith("#301")
    assert "-" in lane_meta(frozen.LANES[2])


def test_level_cells_mark_current_and_knee() -> None:
    snap = frozen.snapshot()
    knee = snap.knee
    assert level_cells(snap.levels[3], 4, knee, "chunk")["level"] == "▶ 8 users"
    assert level_cells(snap.levels[2], 4, knee, "chunk")["level"] == "  4 users ◆"
    cells = level_cells(snap.levels[0], 4, knee, "tpot")
    assert cells["itl"] == cells["tpot"] == triple(snap.levels[0].tpot)
    assert triple(Stats()) == "-"


def test_level_cells_mark_unbounded_and_timing_uncertain_percentiles() -> None:
    """`~` before a percentile too few samples bound (a p99 of 40), `*` after one the client's timing bound
    is 5 % or more of; figures with neither stay bare."""
    level = replace(
        frozen.snapshot().levels[0],
        ttft=stats(np.linspace(100.0, 500.0, 40)),
        timing_uncertain=("itl_chunk_p50", "itl_chunk_p90"),
    )
    cells = level_cells(level, 4, None, "chunk")
    p50, p90, p99 = cells["ttft"].split("/")
    assert not p50.startswith("~") and p90[0] != "~" and p99.startswith("~")  # 40 bound p50 and p90 only
    itl = cells["itl"].split("/")
    assert itl[0].endswith("*") and itl[1].endswith("*") and not itl[2].endswith("*")
    assert "*" not in cells["ttft"] and "~" not in cells["tpot"]


def test_each_level_shows_its_timing_bound_and_whether_the_client_was_the_limit() -> None:
    """The ``± lag`` column, as bench's: the client's timing bound per level ("-" before a health window
    covers it), and "client" beside it where the client limited the load there."""
    level = frozen.snapshot().levels[0]
    assert level_cells(level, 4, None, "chunk")["lag"] == "-"
    assert level_cells(replace(level, client_lag_ms=1.26), 4, None, "chunk")["lag"] == "1.3"
    limited = replace(level, client_lag_ms=12.0, client_limited=True)
    assert level_cells(limited, 4, None, "chunk")["lag"] == "12.0 client"


def test_a_level_too_short_to_measure_shows_no_rates_and_no_curve_point() -> None:
    snap = frozen.snapshot()
    nan = float("nan")
    short = replace(snap.levels[3], value=16.0, steady=False, too_short=True, output_tps=nan,
                    request_per_s=nan, total_tps=nan, ended_s=20.0)  # fmt: skip
    cells = level_cells(short, 99, snap.knee, "chunk")
    assert (cells["tps"], cells["rps"], cells["state"]) == ("-", "-", "short")
    unsteady = replace(snap.levels[3], steady=False, ended_s=20.0)
    assert level_cells(unsteady, 99, snap.knee, "chunk")["state"] == "unsteady"
    colours = CurveColours(
        total=(1, 1, 1), per_request=(2, 2, 2), current=(3, 3, 3), knee=(4, 4, 4), axes=(5, 5, 5)
    )
    with_short = Plot().curve((*snap.levels, short), 4, 4.0, 60, 12, colours).plain
    assert with_short == Plot().curve(snap.levels, 4, 4.0, 60, 12, colours).plain  # no point at 16 users


def _ramped(*tps: float) -> tuple[RampPolicy, Snapshot]:
    """A ramp that ran 1, 2, 4, ... users at these steady tok/s, its levels ended and settled."""
    policy = RampPolicy()
    levels = tuple(
        replace(
            frozen.LEVELS[0], level_id=10 + i, value=float(2**i), output_tps=rate, steady=True, settled=True
        )
        for i, rate in enumerate(tps)
    )
    policy.level_ids = [lv.level_id for lv in levels]
    return policy, frozen.snapshot(levels=levels, level_id=levels[-1].level_id, knee=None)


def _stopped(policy: RampPolicy, snap: Snapshot, kind: RampStop, reason: str) -> RampStep:
    """The step that ends a ramp which decided to stop at its last level for ``kind``."""
    policy._stopping = (kind, reason, snap.level_id, snap.elapsed_s)
    step = policy.step(snap)
    assert step.done and step.verdict is not None
    return step


def test_ramp_result_names_the_knee_and_where_k_goes() -> None:
    current = LoadTarget(concurrency=8, max_concurrency=64)
    policy, snap = _ramped(48.0, 93.0, 176.0, 180.0)
    snap = replace(snap, load=replace(current, paused=True))
    result = ramp_result(_stopped(policy, snap, "knee", "knee at 4 users"))
    assert result.knee == replace(current, concurrency=4)  # the rest of the target is kept
    assert result.status() == "auto ramp stopped: knee at 4 users · k → 4 users"
    assert result.subtitle() == "ramp: knee at 4 users: 176 of a 180 tok/s peak · k → 4 users"
    # A broken SLO at 8 users: k goes to the level before, the last that kept it.
    policy, snap = _ramped(48.0, 93.0, 176.0, 300.0)
    snap = replace(snap, load=replace(current, paused=True))
    broken = ramp_result(_stopped(policy, snap, "slo", "SLO broken at 8 users: TTFT p99 900 ms > 500 ms"))
    assert broken.knee == replace(current, concurrency=4)
    assert broken.status() == "auto ramp stopped: SLO broken at 8 users · k → 4 users"
    # At the ramp's limit while still climbing there is no knee and nothing failed: k has nowhere to go.
    policy, snap = _ramped(48.0, 93.0, 176.0, 300.0)
    limit = ramp_result(_stopped(policy, snap, "limit", "reached the ramp's limit of 8 users"))
    assert limit.knee is None and "k" not in limit.status().split(": ", 1)[1]
    assert snapshot_knee_target(frozen.snapshot(), current) == replace(current, concurrency=4)
    assert snapshot_knee_target(frozen.snapshot(knee=None), current) is None
    rate = replace(frozen.LEVELS[0], mode="rate", value=2.5)
    assert level_target(current, rate) == replace(current, mode="rate", rate=2.5)
    assert load_label(replace(current, mode="rate", rate=2.5)) == "2.5 req/s"


def test_a_ramp_stopped_by_the_client_says_so_with_the_fix_in_the_status_bar() -> None:
    policy, snap = _ramped(48.0, 93.0, 176.0, 180.0)
    last = replace(snap.levels[-1], client_limited=True, client_limit_cause="cpu")
    snap = replace(snap, levels=(*snap.levels[:-1], last), load=LoadTarget(concurrency=8, paused=True))
    result = ramp_result(_stopped(policy, snap, "client", "client is the limit at 8 users"))
    status = result.status()
    assert status == "auto ramp stopped: client is the limit at 8 users · try --workers 2 · k → 4 users"
    # A busy machine: the fix is a free machine, and the status bar says so rather than --workers.
    busy = replace(last, client_limit_cause="machine")
    snap = replace(snap, levels=(*snap.levels[:-1], busy))
    status = ramp_result(_stopped(policy, snap, "client", "client is the limit at 8 users")).status()
    assert "more workers will not help: free the machine" in status and "--workers" not in status


def _lanes(streaming: int, done: int) -> list[LaneView]:
    live = [replace(frozen.LANES[0], request_id=i) for i in range(streaming)]
    return live + [replace(frozen.LANES[3], request_id=100 + i) for i in range(done)]


@pytest.mark.parametrize(
    ("streaming", "done", "in_flight", "rows", "shown", "more"),
    [
        (4, 7, 4, 6, 6, 0),  # the report: 4 in flight, finished lanes cut off are not "more in flight"
        (4, 7, 4, 3, 2, 2),  # too few rows: the last one says how many in flight are not shown
        (4, 0, 8, 10, 4, 4),  # in flight the snapshot carries no lane for
        (4, 0, 8, 4, 3, 5),
        (4, 2, 2, 10, 6, 0),  # worker counts lag the lanes: never a negative count
        (0, 0, 0, 5, 0, 0),
        (3, 0, 3, 0, 0, 3),
    ],
)
def test_lane_counts_add_up_to_in_flight(
    streaming: int, done: int, in_flight: int, rows: int, shown: int, more: int
) -> None:
    lanes, hidden = visible_lanes(_lanes(streaming, done), in_flight, rows)
    assert (len(lanes), hidden) == (shown, more)
    assert len(lanes) + (1 if hidden else 0) <= max(rows, 1)
    live = sum(lane.state == "streaming" for lane in lanes)
    assert hidden == max(0, in_flight - live)


def test_errors_and_detail_text() -> None:
    snap = frozen.snapshot()
    text = errors_content(snap).plain
    assert "2 http_500" in text and text.index("req 250") < text.index("req 298")
    assert errors_content(replace(snap, errors=(), recent_errors=())).plain == "no errors"
    detail = frozen.detail(298)
    assert "HTTP 500" in detail_content(detail, 298).plain
    assert "no longer kept" in detail_content(None, 7).plain
    ok = frozen.detail(301)
    assert ok is not None and len(chunk_timeline(ok, 20)) <= 20


def test_frame_stats() -> None:
    stats = FrameStats()
    for i in range(10):
        stats.record(i * 5_000_000, i * 5_000_000 + 1_000_000, i * 5_000_000 + 2_000_000, i * 100_000_000)
    assert stats.percentile_ms(99) == 2.0 and stats.snapshot_percentile_ms(50) == 1.0
    assert stats.fps == pytest.approx(10.0)
    stats.record_frame(0, 5_000_000)
    assert stats.frame_percentile_ms(50) == 5.0
    assert stats.summary() == "ui 2.0 ms/tick · 5.0 ms/frame · 10 fps"


def test_the_live_ttft_parts_never_show_a_part_below_zero() -> None:
    """Over the live window the client's TTFT and the server's count different requests: a part read below 0
    shows `~0`, never a negative number (seen: net -206 against vLLM at 24 users)."""
    from tui.app.widgets.server_pane import parts_line

    parts = {"server_ttft_ms": 2023.0, "queue_ms": 1305.0, "prefill_ms": 298.0, "server_other_ms": -12.0}
    line = parts_line(parts, 1817.0, wide=True)
    assert line is not None and "network/client ~0" in line and "server other ~0" in line
    assert "-" not in line.split("=", 1)[1]
    fine = parts_line({**parts, "server_other_ms": 420.0}, 2025.0, wide=True)
    assert fine is not None and "network/client 2" in fine and "server other 420" in fine
