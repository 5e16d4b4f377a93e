"""``--baseline``: the curve pane draws the baseline's curve as a second series, and each level row shows
its change of tok/s and TTFT p99 from the baseline's level at the same load (none where it has none)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.app.conftest import MakeApp, screen_text, settle
from tests.support import frozen
from tests.unit.results_data import frozen_results
from tui.app.widgets.level_table import BASE_COLUMN
from tui.engine.recording.file import SessionError
from tui.engine.results.files import write_results
from tui.engine.sessions.baseline import Baseline


def _results(tmp_path: Path) -> Path:
    """A results file whose levels at 1 and 4 users did half the frozen run's tok/s, at twice its TTFT."""
    levels = tuple(
        replace(lv, output_tps=lv.output_tps / 2, ttft=replace(lv.ttft, p99=lv.ttft.p99 * 2))
        for lv in frozen.LEVELS
        if lv.value in (1, 4)
    )
    path = tmp_path / "base.json"
    write_results(frozen_results(snap=frozen.snapshot(levels=levels)), path)
    return path


async def test_the_baseline_is_a_second_curve_and_a_column_of_changes(
    make_app: MakeApp, tmp_path: Path
) -> None:
    baseline = Baseline.load(_results(tmp_path))
    assert baseline.points("concurrency") == [(1.0, 24.0), (4.0, 88.0)]
    app = make_app(baseline=baseline)
    async with app.run_test(size=(200, 50)) as pilot:
        app.poll(force=True)
        await settle(pilot)
        cells = {row: text for (row, key), text in app._table._shown.items() if key == BASE_COLUMN[0]}
        # twice the baseline's tok/s is +100 %; half its TTFT p99 is -50 %
        assert cells == {"1": "+100% -50%", "2": "-", "3": "+100% -50%", "4": "-"}
        assert "∘ baseline" in app._curve.header_lines().plain
        assert screen_text(app).count("∘") >= 3  # the legend and the baseline's two points in the plot


async def test_without_a_baseline_there_is_no_column(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        app.poll(force=True)
        await settle(pilot)
        assert not any(key == BASE_COLUMN[0] for _, key in app._table._shown)
        assert "baseline" not in app._curve.header_lines().plain


def test_a_baseline_that_is_not_a_run_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    with pytest.raises(SessionError, match=r"notes\.txt: not a tokentop session"):
        Baseline.load(bad)
