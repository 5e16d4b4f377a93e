"""How far a percentile or a rate can be trusted (`tui.engine.aggregate.intervals`), and where it shows: the
level's stats and results (`bounded: false`), the bench table (`~`), and the knee by throughput intervals."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from tests.support import frozen
from tui.bench.table import format_table
from tui.engine.aggregate.intervals import order_ranks, quantile_interval, rate_interval
from tui.engine.aggregate.metrics import find_knee, stats
from tui.engine.results.codec import encode
from tui.engine.results.population import population
from tui.engine.snapshot import LevelView


def _coverage(n: int, q: float, lo: int, hi: int) -> float:
    """P(x(lo+1) <= q-quantile <= x(hi+1)) = P(lo+1 <= B <= hi), B ~ Binomial(n, q), by exact sums."""
    return sum(math.comb(n, k) * q**k * (1 - q) ** (n - k) for k in range(lo + 1, hi + 1))


@pytest.mark.parametrize(
    ("n", "q", "ranks"),
    [
        (100, 0.5, (39, 60)),  # the textbook median interval of 100: x(40) .. x(61)
        (6, 0.5, (0, 5)),  # the fewest for a median: min .. max (96.9 %)
        (5, 0.5, None),
        (36, 0.9, (28, 35)),
        (35, 0.9, None),
        (72, 0.95, (63, 71)),
        (71, 0.95, None),
        (367, 0.99, None),  # a p99 needs 368 samples: 0.99^367 is just over 2.5 %
        (40, 0.99, None),
        (0, 0.5, None),
    ],
)
def test_order_statistic_ranks(n: int, q: float, ranks: tuple[int, int] | None) -> None:
    assert order_ranks(n, q) == ranks
    if ranks is not None:
        assert _coverage(n, q, *ranks) >= 0.95


@pytest.mark.parametrize(("n", "q"), [(368, 0.99), (500, 0.9), (1000, 0.95), (20, 0.5), (3000, 0.99)])
def test_every_interval_covers_at_least_95_percent_and_no_narrower_one_would(n: int, q: float) -> None:
    lo, hi = order_ranks(n, q) or (0, 0)
    assert _coverage(n, q, lo, hi) >= 0.95
    assert _coverage(n, q, lo + 1, hi) < 0.975 or _coverage(n, q, lo, hi - 1) < 0.975  # not loose


def test_large_samples_take_the_normal_approximation_without_a_jump() -> None:
    exact, approx = order_ranks(100_000, 0.99), order_ranks(100_001, 0.99)
    assert exact is not None and approx is not None
    assert abs(exact[0] - approx[0]) <= 2 and abs(exact[1] - approx[1]) <= 2


def test_a_percentiles_interval_is_two_of_the_samples() -> None:
    v = np.arange(1.0, 101.0)
    assert quantile_interval(v, 0.5) == (40.0, 61.0)
    assert quantile_interval(v, 0.99) is None


def test_a_levels_stats_carry_intervals_and_the_results_say_which_are_bounded() -> None:
    """40 requests: p50 and p90 bounded, p95 and p99 not (a p99 of 40 is their largest, not a p99)."""
    s = stats(np.linspace(100.0, 500.0, 40))
    assert [ci is not None for ci in s.intervals] == [True, True, False, False]
    lo, hi = s.interval("p50") or (0.0, 0.0)
    assert lo <= s.p50 <= hi and s.unbounded("p99") and not s.unbounded("p50")
    lv = replace(frozen.snapshot().levels[0], ttft=s, output_tps_ci=(95.0, 105.0))
    saved = {name: encode(each) for name, each in population(lv).items()}  # as the results file says it
    assert saved["ttft"]["n"] == 40 and saved["ttft"]["p99"] == {"ci95_ms": None, "bounded": False}
    assert saved["ttft"]["p50"]["bounded"] and saved["ttft"]["p50"]["ci95_ms"] == pytest.approx([lo, hi])
    assert saved["output_throughput"]["ci95"] == [95.0, 105.0]


def test_the_bench_table_marks_a_percentile_it_cannot_bound_yet() -> None:
    first, *rest = (replace(lv, cache_hit_rate=None) for lv in frozen.snapshot().levels)
    few = stats(np.linspace(100.0, 500.0, 40))
    text = format_table((replace(first, ttft=few), *rest))
    cells = text.splitlines()[2].split()  # level, done, fail, ISL, OSL, req/s, tok/s, TTFT p50, TTFT p99
    assert not cells[7].startswith("~") and cells[8].startswith("~")  # TTFT p99 of 40 requests
    assert "~" not in text.splitlines()[3]  # hand-made stats (no intervals) are not judged
    assert "~ too few samples to bound a percentile" in text


def test_a_rates_interval_comes_from_its_seconds() -> None:
    steady = np.full(80, 10.0)  # 8 s of 100 ms buckets, 10 tokens each
    assert rate_interval(steady, 10) == (1.0, 1.0)
    assert rate_interval(steady[:39], 10) is None  # 3 whole seconds: too few blocks
    stalled = steady.copy()
    stalled[30:50] = 0.0  # two seconds of nothing: the interval widens around the figure
    lo, hi = rate_interval(stalled, 10) or (1.0, 1.0)
    assert lo < 0.8 and hi > 1.1


def _level(level_id: int, users: int, tps: float, ci: tuple[float, float] | None) -> LevelView:
    base = frozen.snapshot().levels[0]
    return replace(base, level_id=level_id, value=users, output_tps=tps, output_tps_ci=ci, steady=True)


def test_the_knee_takes_a_level_within_noise_of_the_best() -> None:
    """4 users read 6 % under 8 (outside the 5 % tolerance) but their intervals overlap: within noise of
    the best, and its own figure known to +-2.5 %: the knee. The rule by figures alone found none."""
    levels = [
        _level(1, 2, 100.0, (97, 103)),
        _level(2, 4, 188.0, (184, 197)),
        _level(3, 8, 200.0, (196, 204)),
    ]
    knee = find_knee(levels)
    assert knee is not None and knee.value == 4
    assert find_knee([replace(lv, output_tps_ci=None) for lv in levels]) is None


def test_no_knee_from_a_plateau_only_noise_puts_there() -> None:
    """A level whose interval is as wide as +-19 % reaches the best's: "within noise" says only that it is
    too noisy to tell, so no knee yet; a level beyond noise under the best is below the plateau."""
    noisy = [_level(1, 2, 100.0, (97, 103)), _level(2, 4, 185.0, (150, 220)), _level(3, 8, 200.0, (196, 204))]
    assert find_knee(noisy) is None
    below = [_level(1, 2, 100.0, (97, 103)), _level(2, 4, 180.0, (176, 184)), _level(3, 8, 200.0, (196, 204))]
    assert find_knee(below) is None  # 8 is the best and the highest: still climbing
    flat = [*below, _level(4, 16, 198.0, (194, 203))]
    assert (knee := find_knee(flat)) is not None and knee.value == 8
