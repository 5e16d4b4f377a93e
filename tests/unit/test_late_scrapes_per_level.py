"""Late scrapes of a slow `/metrics` are counted per level: each level's server figures carry the ones in
its window (`server.late_scrapes`, written only when any), the app's level table says them in its server
cell, and bench names them under its table. Before,
only the run's count existed, so a level could not say whether its own server figures were old."""

from __future__ import annotations

from tests.support import frozen
from tui.app.widgets.level_table import server_cell
from tui.bench.table import summary
from tui.engine.results.codec import encode
from tui.engine.results.level_server import level_server
from tui.engine.server_metrics.view import ServerView

SECOND_NS = 1_000_000_000


def test_each_level_counts_the_late_scrapes_in_its_own_window() -> None:
    view = ServerView(late=3, late_at_ns=(5 * SECOND_NS, 15 * SECOND_NS, 16 * SECOND_NS))
    first = view.level_summary(0, 10 * SECOND_NS)
    second = view.level_summary(10 * SECOND_NS, 20 * SECOND_NS)
    quiet = view.level_summary(20 * SECOND_NS, 30 * SECOND_NS)
    assert first["late_scrapes"] == 1 and second["late_scrapes"] == 2
    assert "late_scrapes" not in quiet  # a level without any: its figures unchanged
    typed = level_server(second)
    assert typed is not None and typed.late_scrapes == 2 and "late_scrapes" not in typed.extra
    assert encode(typed)["late_scrapes"] == 2
    quiet_typed = level_server(quiet)
    assert quiet_typed is not None and "late_scrapes" not in encode(quiet_typed)


def test_bench_names_the_levels_whose_scrapes_were_late() -> None:
    snap = frozen.snapshot()
    assert "late scrapes" not in summary(snap)
    lines = [line for line in summary(snap, late={2: 3, 1: 1}).splitlines() if "late scrapes" in line]
    assert lines == [
        "late scrapes of /metrics (level 1: 1, level 2: 3): "
        "those levels' server figures are up to seconds old"
    ]


def test_the_apps_level_table_says_a_levels_late_scrapes_in_its_server_cell() -> None:
    view = ServerView(late=3, late_at_ns=(5 * SECOND_NS, 15 * SECOND_NS, 16 * SECOND_NS))
    figures = view.table_figures(10 * SECOND_NS, 20 * SECOND_NS)
    assert figures["late_scrapes"] == 2 and "late_scrapes" not in view.table_figures(0, 4 * SECOND_NS)
    means = {"running": 3.25, "waiting": 0.5, "kv_usage": 0.42}
    assert server_cell({**means, "late_scrapes": 2.0}) == "3.2/0.5/42% late 2"
    assert server_cell(means) == "3.2/0.5/42%"
