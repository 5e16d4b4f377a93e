"""The statistics behind compare's verdicts and the SLO attainment: the block bootstrap, the threshold rule
and Wilson's interval, against values worked out by hand or by a reference."""

from __future__ import annotations

import numpy as np
import pytest

from tui.engine.aggregate.run_noise import Side, bounded_from, change_interval, verdict, wilson_interval


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        # the roots of (p - x)^2 = z^2 x (1 - x) / n, z = 1.959964 (Wilson 95 %), solved apart
        (0, 10, 0.0, 0.2775327),
        (10, 10, 0.7224673, 1.0),
        (5, 10, 0.2365931, 0.7634069),
        (95, 100, 0.8882495, 0.9784563),
        (1, 1, 0.2065493, 1.0),
        (0, 0, 0.0, 1.0),
    ],
)
def test_wilson_interval_matches_the_reference(successes: int, trials: int, low: float, high: float) -> None:
    lo, hi = wilson_interval(successes, trials)
    assert lo == pytest.approx(low, abs=1e-6) and hi == pytest.approx(high, abs=1e-6)


@pytest.mark.parametrize(
    ("interval", "higher_is_better", "expected"),
    [
        ((6.0, 9.0), True, "better"),
        ((6.0, 9.0), False, "worse"),
        ((-9.0, -6.0), True, "worse"),
        ((-9.0, -6.0), False, "better"),
        ((0.5, 4.0), True, "within noise"),  # beyond 0, not beyond the threshold: too small to matter
        ((-4.0, -0.5), False, "within noise"),
        ((-2.0, 8.0), True, "within noise"),  # straddles 0
    ],
)
def test_a_verdict_needs_the_whole_interval_beyond_the_threshold(
    interval: tuple[float, float], higher_is_better: bool, expected: str
) -> None:
    assert verdict(interval, 5.0, higher_is_better) == expected


def _blocks(rng: np.random.Generator, centre: float, n_blocks: int, per_block: int) -> list[np.ndarray]:
    return [rng.normal(centre, 1.0, per_block) for _ in range(n_blocks)]


def test_the_figure_weighs_each_drawn_block() -> None:
    side = Side([[np.array([1.0, 2.0]), np.array([10.0])]])
    assert side.figure("mean")[0] == pytest.approx(13 / 3)
    counts = np.array([[2, 0], [0, 2]])  # first block twice, then the second twice
    assert list(side.figure("mean", counts)) == [1.5, 10.0]
    assert list(side.figure("p50", counts)) == [1.0, 10.0]
    assert side.figure("p99")[0] == 10.0


def test_identical_sides_give_an_interval_around_zero_and_a_shift_shows() -> None:
    rng = np.random.default_rng(1)
    a = Side([_blocks(rng, 100, 10, 20)])
    same = change_interval(a, a, "p50")
    assert same is not None and same[0] < 0 < same[1]
    shifted = Side([[b + 20 for b in _blocks(rng, 100, 10, 20)]])
    lo, hi = change_interval(a, shifted, "p50") or (0, 0)
    assert 15 < lo < 20 < hi < 25


def test_drift_between_blocks_widens_the_interval_that_request_resampling_would_miss() -> None:
    rng = np.random.default_rng(2)
    steady = Side([[np.array([100.0 + rng.normal(0, 1)]) for _ in range(10)]])
    drifting = Side([[np.array([100.0 + 3 * i]) for i in range(10)]])  # a rate that climbs over the window
    lo_s, hi_s = change_interval(steady, steady, "mean") or (0, 0)
    lo_d, hi_d = change_interval(drifting, drifting, "mean") or (0, 0)
    assert hi_d - lo_d > 5 * (hi_s - lo_s)


def test_repeated_runs_add_their_spread() -> None:
    """Two runs per side whose levels differ by 10 % from each other: the between-run spread must keep a
    4 % difference of the means from looking certain, though every run's blocks are tight."""
    tight = [np.array([x]) for x in np.linspace(99.5, 100.5, 10)]
    base = Side([tight, [b * 1.10 for b in tight]])
    other = Side([[b * 1.04 for b in tight], [b * 1.14 for b in tight]])
    lo, hi = change_interval(base, other, "mean") or (0, 0)
    assert lo < 0 < hi
    one_run = change_interval(Side([tight]), Side([[b * 1.04 for b in tight]]), "mean")
    assert one_run is not None and one_run[0] > 3


@pytest.mark.parametrize(("percentile", "samples"), [(99, 368), (50, 6), (95, 72), (99.9, 3688)])
def test_a_percentile_is_bounded_from_the_count_where_its_largest_sample_is_a_95_bound(
    percentile: float, samples: int
) -> None:
    q = percentile / 100
    assert 1 - q**samples >= 0.975 > 1 - q ** (samples - 1)
    assert bounded_from(percentile) == samples


def test_no_samples_is_no_interval() -> None:
    assert change_interval(Side([[np.empty(0)]]), Side([[np.array([1.0])]]), "p50") is None
