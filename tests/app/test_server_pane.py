"""The server pane: the server's own signals from its /metrics beside the client's figures."""

from __future__ import annotations

from pathlib import Path

from tests.app.conftest import MakeApp, screen_text, settle
from tests.support import frozen
from tests.support.fake_engine import FakeEngine
from tui.app.widgets.server_pane import server_content, sparkline
from tui.engine.server_metrics.kinds import VLLM
from tui.engine.server_metrics.parse import parse_text
from tui.engine.server_metrics.view import MISSING, Reading, ServerView, build_view, read

FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "server_metrics"
S = 1_000_000_000


def _view() -> ServerView:
    """Two scrapes of the simulator's recorded /metrics a second apart, the second with 2 more waiting."""
    first = read(parse_text((FIXTURES / "vllm_sim.txt").read_text()), 0, VLLM)
    later = Reading(S, {**first.gauges, "waiting": first.gauges.get("waiting", 0.0) + 2}, first.counters,
                    first.histograms)  # fmt: skip
    return build_view(ServerView(url="http://127.0.0.1:8000/metrics", kind=VLLM), (first, later), "sim-m")


def test_sparkline_scales_to_the_maximum() -> None:
    assert sparkline([0, 1, 2, 4], 8) == "▁▃▅█"  # rounded to the nearest of 8 levels
    assert sparkline([0, 0], 8) == "▁▁" and sparkline([], 8) == ""
    assert len(sparkline(list(range(100)), 10)) == 10


def test_content_of_a_view_and_of_each_missing_case() -> None:
    view = _view()
    text = server_content(view, frozen.snapshot()).plain
    assert f"waiting{'':<2}{view.current['waiting']:>6,.0f}" in text
    assert "running" in text and "KV cache" in text and "tok/s" in text
    off = server_content(None, None).plain
    assert off == "server metrics off (--no-server-metrics)"
    hint = "no /metrics at http://h/metrics (HTTP 404); llama-server: start it with --metrics"
    missing = ServerView(status=MISSING, url="http://h/metrics", message=hint)
    assert server_content(missing, None).plain == hint


async def test_the_pane_shows_the_servers_view_beside_the_levels(
    engine: FakeEngine, make_app: MakeApp
) -> None:
    engine.server = _view()
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        text = screen_text(app)
    assert "server · vllm · sim-m" in text
    assert "running" in text and "waiting" in text and "KV cache" in text
    assert "load levels" in text and "errors" in text  # beside the table and the errors, not instead


async def test_the_pane_joins_the_levels_group_on_a_small_terminal(
    engine: FakeEngine, make_app: MakeApp
) -> None:
    engine.server = _view()
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for _ in range(3):
            if "server · vllm" in screen_text(app):
                break
            await pilot.press("v")
            await settle(pilot)
        assert "server · vllm" in screen_text(app)


async def test_watch_mode_shows_only_the_server_and_sends_no_load(
    engine: FakeEngine, make_app: MakeApp
) -> None:
    engine.server = _view()
    app = make_app(watch_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("plus", "right_square_bracket", "a", "space")
        await settle(pilot)
        text = screen_text(app)
    assert engine.loads == []  # the load keys are off
    assert "watching: no load sent" in text and "server · vllm · sim-m" in text
    assert "token streams" not in text and "load levels" not in text and "errors ·" not in text
    assert "+/- load" not in text.splitlines()[-1] and "q quit" in text.splitlines()[-1]


def test_the_level_table_cell_is_the_servers_average_over_the_level() -> None:
    from tui.app.widgets.level_table import server_cell, server_means

    view = _view()  # readings at 0 s (waiting w) and 1 s (waiting w + 2)
    levels = frozen.snapshot().levels
    means = server_means(view, levels[:1], t0_ns=-10 * S, now_ns=0)
    assert set(means) == {levels[0].level_id}
    assert server_cell({"running": 3.25, "waiting": 0.5, "kv_usage": 0.42}) == "3.2/0.5/42%"
    assert server_cell({"running": 2.0, "waiting": None, "kv_usage": None}) == "2.0/-/-"
    assert server_cell(None) == "-" and server_means(None, levels, 0, 0) == {}


async def test_the_level_table_shows_the_servers_column(engine: FakeEngine, make_app: MakeApp) -> None:
    engine.server = _view()
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        app.poll(force=True)
        await settle(pilot)
        text = screen_text(app)
    assert "server run/wait/KV" in text


def test_the_tables_server_cell_of_a_settled_level_outlives_the_ring() -> None:
    """The table keeps a settled level's server figures once the ring has dropped its scrapes; a level not
    yet settled (its last requests still out) is read from the ring each time."""
    from dataclasses import replace

    from tui.app.widgets.level_table import ServerMeans

    view = _view()  # readings at 0 s and 1 s
    level = frozen.snapshot().levels[0]
    assert level.span_s(0.0) == (0.0, 10.0)
    t0 = -10 * S  # the run began 10 s before the first scrape: the level's span ends at it
    settled = (replace(level, settled=True),)
    unsettled = (replace(level, level_id=9, settled=False),)
    means = ServerMeans()
    first = means.of(view, settled + unsettled, t0, 2 * S)
    assert first[level.level_id]["waiting"] is not None and first[9] == first[level.level_id]
    # the ring moves on: only a scrape at 5 s is left
    (_, last) = view.readings
    moved = replace(view, readings=(replace(last, t_ns=5 * S),), scrapes=view.scrapes + 1)
    again = means.of(moved, settled + unsettled, t0, 6 * S)
    assert again[level.level_id] == first[level.level_id]
    assert again[9]["waiting"] is None  # nothing left in the ring before its window's end


def _full_view() -> ServerView:
    """Two scrapes of a vLLM with TTFT parts, two GPUs, a canary and a restart seen."""
    from dataclasses import replace

    from tui.engine.server_metrics.parse import Buckets
    from tui.engine.server_metrics.view import CanaryFigures

    edges = (0.3, 0.5, float("inf"))

    def hists(n: float) -> dict[str, Buckets]:
        return {
            "queue_s": Buckets(edges, (0.0, 0.0, n), n * 0.64),
            "prefill_s": Buckets(edges, (n, n, n), n * 0.21),
            "ttft_s": Buckets(edges, (0.0, 0.0, n), n * 0.85),
        }

    gpu = {"gpu_util": 0.93, "sm_active": 0.12, "dram_active": 0.95, "fb_used_mib": 140_000.0,
           "fb_free_mib": 23_118.0, "power_w": 900.0, "gpu_util@0": 0.93, "gpu_util@1": 0.93}  # fmt: skip
    first = Reading(0, {"running": 8.0, "waiting": 3.0, "kv_usage": 0.4, **gpu}, {}, hists(0.0))
    later = Reading(S, {"running": 8.0, "waiting": 5.0, "kv_usage": 0.5, **gpu}, {}, hists(10.0))
    view = build_view(ServerView(url="http://127.0.0.1:8000/metrics", kind=VLLM), (first, later), "sim-m")
    return replace(view, canary=CanaryFigures(1.0, 9, 120.0, 310.0, 118.0, 0), resets=1, reset_t_ns=S // 2)


def test_the_pane_says_ttft_in_parts_the_canary_the_gpu_and_the_restart() -> None:
    view = _full_view()
    text = server_content(view, None, width=38).plain
    assert "TTFT 850ms =\n  queue 640 + prefill 210" in text
    assert "canary 120ms p99 310ms (1/s)" in text
    assert "GPU×2 93% SM 12% DRAM 95% FB 86% 900W" in text
    assert "queue    p50 >500ms" in text  # every wait past the last finite edge: a bound, no number
    assert "estimate from buckets" in text
    wide = server_content(view, None, width=80).plain
    assert "TTFT 850ms = queue 640 + prefill 210" in wide


async def test_at_160x48_the_pane_shows_the_parts_the_canary_and_the_gpu(
    engine: FakeEngine, make_app: MakeApp
) -> None:
    engine.server = _full_view()
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.poll(force=True)
        await settle(pilot)
        text = screen_text(app)
    assert "TTFT" in text and "queue 640 + prefill 210" in text
    assert "canary 120ms p99 310ms" in text and "GPU×2 93%" in text
    assert "⟲ restarted" in text


async def test_the_small_terminals_server_group_shows_them_too(engine: FakeEngine, make_app: MakeApp) -> None:
    engine.server = _full_view()
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for _ in range(4):  # `v` cycles the groups: live, latency, levels (with the server), server
            if "GPU×2" in screen_text(app):
                break
            await pilot.press("v")
            await settle(pilot)
        text = screen_text(app)
    assert "queue 640 + prefill 210" in text and "canary 120ms" in text and "GPU×2 93%" in text
