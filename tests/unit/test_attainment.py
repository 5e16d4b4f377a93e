"""A level's SLO attainment from its window's requests: every objective counts, a failure counts against,
cut requests stand apart, goodput is the met requests' rates; a sample scales to the whole."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tui.engine.aggregate.attainment import slo_view
from tui.engine.aggregate.run_noise import wilson_interval


def _rows(ttft: list[float], tpot: list[float], e2e: list[float], osl: list[float]) -> dict[str, np.ndarray]:
    return {
        k: np.array(v, float)
        for k, v in (("ttft_ms", ttft), ("tpot_ms", tpot), ("e2e_ms", e2e), ("osl", osl))
    }


ROWS = _rows([10, 50, 20, 30], [5, 5, math.nan, 9], [100, 300, 120, 400], [10, 20, 1, 40])


@pytest.mark.parametrize(
    ("slo", "met", "tokens"),
    [
        ((40.0, None, None), [0, 2, 3], 51),  # TTFT only
        ((40.0, 6.0, None), [0, 2], 11),  # a request of one token has no TPOT: it meets a TPOT objective
        ((None, None, 350.0), [0, 1, 2], 31),  # E2E only
        ((60.0, 10.0, 350.0), [0, 1, 2], 31),
    ],
)
def test_every_objective_counts_and_failures_count_against(
    slo: tuple[float | None, float | None, float | None], met: list[int], tokens: float
) -> None:
    view = slo_view(ROWS, ok=4, failed=2, cut=3, window_s=2.0, measured=True, slo=slo)
    assert view is not None
    assert (view.met, view.requests, view.cut) == (len(met), 6, 3)
    assert view.attainment == len(met) / 6
    assert (view.low, view.high) == wilson_interval(len(met), 6)
    assert (view.goodput_rps, view.goodput_tps) == (len(met) / 2.0, tokens / 2.0)


def test_no_objective_is_no_view_and_an_unmeasured_window_no_rate() -> None:
    assert slo_view(ROWS, ok=4, failed=0, cut=0, window_s=2.0, measured=True, slo=(None, None, None)) is None
    view = slo_view(ROWS, ok=4, failed=0, cut=0, window_s=0.1, measured=False, slo=(40.0, None, None))
    assert view is not None and view.met == 3 and math.isnan(view.goodput_rps)
    empty = slo_view(
        _rows([], [], [], []), ok=0, failed=0, cut=0, window_s=1, measured=True, slo=(1.0, None, None)
    )
    assert empty is not None and math.isnan(empty.attainment) and (empty.low, empty.high) == (0.0, 1.0)


def test_a_uniform_sample_scales_to_the_levels_count() -> None:
    """Past the exact cap the rows are a uniform sample of ``ok`` requests: 3 of 4 met reads 75 of 100."""
    view = slo_view(ROWS, ok=100, failed=0, cut=0, window_s=10.0, measured=True, slo=(40.0, None, None))
    assert view is not None and (view.met, view.requests) == (75, 100)
