"""The one formatting module: each formatter's text, table-tested (every face shows these strings)."""

from __future__ import annotations

import math

import pytest

from tui import units

NAN = math.nan


@pytest.mark.parametrize(
    ("ms", "text"), [(0.854, "0.85"), (12.34, "12.3"), (123.4, "123"), (NAN, "-"), (None, "-")]
)
def test_ms_figure_keeps_three_figures(ms: float | None, text: str) -> None:
    assert units.ms_figure(ms) == text


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0.5, "500us"), (2.5, "2.5ms"), (12.4, "12ms"), (1500, "1.5s"), (12_500, "12s"), (NAN, "-")],
)
def test_ms_label_carries_its_unit(ms: float, text: str) -> None:
    assert units.ms_label(ms) == text


@pytest.mark.parametrize(("ms", "text"), [(NAN, "-"), (2.5, "2.5"), (95.4, "95"), (2500, "2.5s")])
def test_ms_short_fits_a_column(ms: float, text: str) -> None:
    assert units.ms_short(ms) == text


@pytest.mark.parametrize(("ms", "text"), [(0.5, "0.5"), (120, "120"), (2500, "2.5 s")])
def test_ms_tick(ms: float, text: str) -> None:
    assert units.ms_tick(ms) == text


@pytest.mark.parametrize(
    ("x", "text"), [(None, "-"), (0.012345, "0.01235"), (1234.5, "1234"), (123456.0, "123,456")]
)
def test_figure(x: float | None, text: str) -> None:
    assert units.figure(x) == text


def test_rate_has_separators_and_a_dash_for_nothing() -> None:
    assert units.rate(12345.67) == "12,345.7" and units.rate(2.5, 2) == "2.50" and units.rate(NAN) == "-"


@pytest.mark.parametrize(("s", "text"), [(37.5, "00:37"), (3725, "1:02:05"), (-3, "00:00")])
def test_elapsed(s: float, text: str) -> None:
    assert units.elapsed(s) == text


@pytest.mark.parametrize(
    ("s", "text"), [(0, "0:00"), (7.9, "0:07"), (65, "1:05"), (3725, "1:02:05"), (-1, "-:--"), (NAN, "-:--")]
)
def test_clock(s: float, text: str) -> None:
    assert units.clock(s) == text
