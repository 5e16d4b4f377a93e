"""Metrics: table tests of the pure functions and the bounded aggregates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tui.engine.aggregate import metrics as m
from tui.engine.aggregate.series import MetricSeries, Reservoir, Timeline
from tui.engine.config import LoadMode, LoadTarget
from tui.engine.load.split import split_load
from tui.engine.snapshot import LevelView, Stats

MS = 1_000_000


# --- a hand-made request ------------------------------------------------------------------------------
# sent at 0; chunks at 100, 110, 130, 160 ms carrying 1, 2, 2, 3 tokens (8 in all); end at 170 ms.
SENT, CHUNKS, END, OSL = 0, [100 * MS, 110 * MS, 130 * MS, 160 * MS], 170 * MS, 8


def test_itl_conventions_on_a_hand_made_request() -> None:
    fig = m.request_figures([SENT], [CHUNKS[0]], [END], [OSL], [len(CHUNKS)])
    assert fig.ttft_ms[0] == pytest.approx(100.0)
    assert fig.e2e_ms[0] == pytest.approx(170.0)
    # tpot: (E2E - TTFT) / (OSL - 1) = 70 / 7
    assert fig.tpot_ms[0] == pytest.approx(10.0)
    # LLMPerf: E2E / OSL = 170 / 8
    assert fig.itl_e2e_ms[0] == pytest.approx(21.25)
    assert fig.tokens_per_chunk[0] == pytest.approx(2.0)
    assert fig.decode_tps[0] == pytest.approx(100.0)  # 7 tokens in 70 ms
    # chunk: gaps between content chunks, not divided by tokens (vLLM itl)
    assert m.chunk_gaps_ms(CHUNKS).tolist() == pytest.approx([10.0, 20.0, 30.0])


@pytest.mark.parametrize(
    ("osl", "tpot", "itl_e2e"),
    [(1, math.nan, 170.0), (0, math.nan, math.nan), (2, 70.0, 85.0)],
)
def test_conventions_at_tiny_outputs(osl: int, tpot: float, itl_e2e: float) -> None:
    fig = m.request_figures([SENT], [CHUNKS[0]], [END], [osl], [1])
    np.testing.assert_equal(fig.tpot_ms[0], tpot)
    np.testing.assert_equal(fig.itl_e2e_ms[0], itl_e2e)


def test_no_content_means_no_ttft() -> None:
    fig = m.request_figures([0], [np.nan], [END], [0], [0])
    assert math.isnan(fig.ttft_ms[0]) and math.isnan(fig.tokens_per_chunk[0])


@pytest.mark.parametrize(
    ("chunks", "usage", "per_chunk", "expected"),
    [
        (4, 8, None, [2.0] * 4),
        (4, None, None, [1.0] * 4),
        (3, 9, [1, 3, 5], [1.0, 3.0, 5.0]),
        (0, 5, None, []),
    ],
)
def test_chunk_token_weights(
    chunks: int, usage: int | None, per_chunk: list[int] | None, expected: list[float]
) -> None:
    assert m.chunk_token_weights(chunks, usage, per_chunk).tolist() == expected


def test_stats_match_numpy_and_vllm_conventions() -> None:
    v = np.arange(1, 101, dtype=float)
    s = m.stats(v)
    assert (s.n, s.mean, s.min, s.max) == (100, 50.5, 1.0, 100.0)
    assert s.std == pytest.approx(np.std(v))  # population std, like vLLM
    assert s.p50 == pytest.approx(50.5)
    assert s.p90 == pytest.approx(np.percentile(v, 90))
    assert s.p99 == pytest.approx(99.01)


def test_stats_empty_and_nan() -> None:
    assert m.stats([]) == Stats()
    assert m.stats([np.nan, 2.0]).n == 1


def test_histogram_percentiles_within_one_bin() -> None:
    rng = np.random.default_rng(1)
    v = rng.lognormal(mean=3.0, sigma=0.7, size=50_000)
    fine = m.fine_histogram(v)
    got = m.hist_percentiles(fine, m.PERCENTILES, float(v.min()), float(v.max()))
    want = np.percentile(v, m.PERCENTILES)
    for g, w in zip(got, want, strict=True):
        assert abs(g / w - 1) < 0.05
    mom = m.Moments()
    mom.add(v)
    s = m.stats_from_fine(fine, mom)
    assert s.mean == pytest.approx(v.mean()) and s.std == pytest.approx(v.std(), rel=1e-6)


def test_display_edges_are_fine_edges_and_counts_agree() -> None:
    for e in m.DISPLAY_EDGES_MS:
        assert np.isclose(m.FINE_EDGES_MS, e, rtol=1e-9).any()
    v = np.array([0.001, 0.1, 0.5, 5.0, 5.0, 99.0, 1e5, 1e9])
    from_fine = m.display_counts_from_fine(m.fine_histogram(v))
    assert from_fine.tolist() == m.display_counts(v).tolist()
    assert from_fine.sum() == v.size  # out-of-range values land in the end bins


def test_goodput_mask() -> None:
    ttft = np.array([10.0, 50.0, 10.0])
    tpot = np.array([5.0, 5.0, np.nan])
    assert m.good_mask(ttft, tpot, 20.0, 6.0).tolist() == [True, False, True]
    assert m.good_mask(ttft, tpot, None, None).all()


# --- steady window ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "median", "earlier_in_flight", "earlier_end", "expected"),
    [
        (1000, 200.0, 0, None, 1200),  # first level: one median E2E after the start
        (1000, 200.0, 0, 1500, 1500),  # earlier requests drained late: wait for them
        (1000, 200.0, 0, 1100, 1200),
        (1000, 200.0, 2, 1100, None),  # earlier requests still in flight
        (1000, None, 0, None, None),  # nothing finished at this level yet
    ],
)
def test_steady_from(
    start: int, median: float | None, earlier_in_flight: int, earlier_end: int | None, expected: int | None
) -> None:
    assert m.steady_from_ns(start, median, earlier_in_flight, earlier_end) == expected


# --- knee ---------------------------------------------------------------------------------------------


def _lv(
    level_id: int, value: float, tps: float, steady: bool = True, mode: LoadMode = "concurrency"
) -> LevelView:
    s = Stats()
    return LevelView(
        level_id,
        mode,
        value,
        0.0,
        None,
        0.0,
        steady,
        10,
        0,
        tps,
        1.0,
        1.0,
        s,
        s,
        s,
        s,
        s,
        1.0,
        s,
    )


@pytest.mark.parametrize(
    ("curve", "knee_value"),
    [
        ([(1, 100), (2, 195), (4, 380), (8, 700), (16, 950), (32, 1000), (64, 1010)], 32),
        ([(1, 100), (2, 200), (4, 400), (8, 790), (16, 780)], 8),  # overload: past the peak
        ([(1, 100), (2, 200), (4, 395)], None),  # still climbing
        ([(1, 100), (2, 101)], 1),  # flat from the start
        ([(1, 100)], None),
        ([(4, 400), (1, 100), (2, 200), (8, 401)], 4),  # order of measurement does not matter
    ],
)
def test_find_knee(curve: list[tuple[float, float]], knee_value: float | None) -> None:
    levels = [_lv(i + 1, v, t) for i, (v, t) in enumerate(curve)]
    knee = m.find_knee(levels)
    assert (knee.value if knee else None) == knee_value
    if knee is not None:
        assert knee.peak_tps == max(t for _, t in curve)
        assert "5%" in knee.rule


def test_find_knee_ignores_unsteady_levels_and_other_modes_and_takes_latest_repeat() -> None:
    levels = [
        _lv(1, 1, 100),
        _lv(2, 2, 200),
        _lv(3, 4, 400),
        _lv(4, 8, 999, steady=False),
        _lv(5, 8, 405),
        _lv(6, 5.0, 50, mode="rate"),
    ]
    assert m.find_knee(levels) is None  # the last level is open loop: only one rate point
    knee = m.find_knee(levels[:5])
    assert knee is not None and knee.value == 4 and knee.peak_tps == 405


# --- bounded aggregates -------------------------------------------------------------------------------


def test_metric_series_exact_then_histogram_fallback() -> None:
    t0 = 0
    s = MetricSeries(t0, cap=1000)
    # 100 samples/s for 30 s, value = 1 + second (so each second is distinguishable)
    for sec in range(30):
        t = np.full(100, sec * 1_000_000_000 + 500_000_000, dtype=np.int64)
        s.add(t, np.full(100, 1.0 + sec))
    now = 30 * 1_000_000_000
    h10 = s.histogram(now, 10.0)
    assert h10.stats.n == 1000 and h10.stats.min == 21.0  # exact: the ring holds the last 10 s
    h30 = s.histogram(now, 30.0)  # the ring no longer covers 30 s: per-second histograms
    assert h30.stats.n == 3000 and h30.stats.min == 1.0 and h30.stats.max == 30.0
    assert h30.stats.mean == pytest.approx(15.5)
    assert sum(h30.counts) == 3000
    hall = s.histogram(now, None)
    assert hall.stats.n == 3000 and abs(hall.stats.p50 / 15.5 - 1) < 0.06
    assert len(hall.edges_ms) == len(hall.counts) + 1


def test_metric_series_drops_nan_and_windows_by_stamp() -> None:
    s = MetricSeries(0)
    s.add(np.array([1, 2, 3], dtype=np.int64) * 1_000_000_000, np.array([5.0, np.nan, 7.0]))
    assert s.histogram(3_000_000_000, None).stats.n == 2
    assert s.histogram(3_000_000_000, 1.5).stats.n == 1


def test_reservoir_exact_then_uniform_sample() -> None:
    r = Reservoir(100, {"x": np.int64})
    r.add({"x": np.arange(60)})
    assert r.exact and r.view()["x"].tolist() == list(range(60))
    for start in range(60, 10_060, 500):
        r.add({"x": np.arange(start, start + 500)})
    assert not r.exact and r.size == 100 and r.seen == 10_060
    x = r.view()["x"]
    assert len(set(x.tolist())) == 100
    assert 2000 < x.mean() < 8000  # a sample of the whole stream, not its start or end


def test_timeline_sums_and_doubles_its_bucket_width() -> None:
    tl = Timeline(start_ns=0, res_ns=100, buckets=8)
    tl.add(Timeline.TOK, np.array([0, 150, 250, 799], dtype=np.int64), np.array([1.0, 2.0, 3.0, 4.0]))
    b0, b1 = tl.align(100, 300)
    assert (b0, b1) == (1, 3) and tl.total(Timeline.TOK, b0, b1) == 5.0
    tl.add(Timeline.TOK, np.array([1500], dtype=np.int64), np.array([10.0]))  # outgrows 8 x 100 ns
    assert tl.res_ns == 200 and tl.n == 8
    assert tl.total(Timeline.TOK, 0) == 20.0
    b0, b1 = tl.align(100, 700)  # rounds inward to the 200 ns buckets
    assert (tl.edge_ns(b0), tl.edge_ns(b1)) == (200, 600)


# --- load split ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "workers", "users", "rates", "caps"),
    [
        (LoadTarget(concurrency=10), 3, [4, 3, 3], None, None),
        (LoadTarget(concurrency=1), 2, [1, 0], None, None),
        (LoadTarget(mode="rate", rate=9.0), 3, None, [3.0, 3.0, 3.0], None),
        (LoadTarget(mode="rate", rate=8.0, max_concurrency=3), 2, None, [16 / 3, 8 / 3], [2, 1]),
    ],
)
def test_split_load(
    target: LoadTarget,
    workers: int,
    users: list[int] | None,
    rates: list[float] | None,
    caps: list[int] | None,
) -> None:
    shares = split_load(target, workers, level_id=7)
    assert all(s.level_id == 7 for s in shares)
    if users is not None:
        assert [s.concurrency for s in shares] == users
    if rates is not None:
        assert [s.rate for s in shares] == pytest.approx(rates)
        assert sum(s.rate for s in shares) == pytest.approx(target.rate)
    if caps is not None:
        assert [s.max_concurrency for s in shares] == caps
