"""The workers' arrival counts against the stamps they come from: tokens by time, TTFT at the first chunk,
one gap per pair of consecutive chunks (across batches too), and the face's binned log of them."""

from __future__ import annotations

from array import array

import numpy as np

from tui.engine import bins
from tui.engine.aggregate.binned_log import BinnedLog
from tui.engine.load.arrival_counts import ArrivalCollector
from tui.engine.wire import ARRIVAL_BUCKET_NS

MS = 1_000_000
T0 = 10**12


def _ints(raw: bytes) -> list[int]:
    return [int(x) for x in np.frombuffer(raw, dtype=np.int64)]


def test_two_streams_over_two_batches_count_every_token_ttft_and_gap() -> None:
    a = [T0 + 50 * MS + k * 7 * MS for k in range(10)]  # sent at T0: TTFT 50 ms, gaps 7 ms
    b = [T0 + 200 * MS + k * 30 * MS for k in range(4)]  # sent at T0 + 100 ms: TTFT 100 ms, gaps 30 ms
    counts_b = array("q", [3, 1, 2, 5]).tobytes()
    c = ArrivalCollector()
    # first batch: a's first 6 chunks, b's first 2
    c.note(1, T0, None, array("q", a[:6]).tobytes(), None)
    c.note(1, T0 + 100 * MS, None, array("q", b[:2]).tobytes(), counts_b[:16])
    (first,) = c.take()
    # second batch: the rest, each linked to its stream's last stamp
    c.note(1, T0, a[5], array("q", a[6:]).tobytes(), None)
    c.note(1, T0 + 100 * MS, b[1], array("q", b[2:]).tobytes(), counts_b[16:])
    (second,) = c.take()
    assert c.take() == ()
    ttft = dict(zip(_ints(first.ttft_bins), _ints(first.ttft_counts), strict=True))
    assert ttft == {int(bins.fine_bins(np.array([50.0]))[0]): 1, int(bins.fine_bins(np.array([100.0]))[0]): 1}
    assert second.ttft_counts == b""
    gaps: dict[int, int] = {}
    for arr in (first, second):
        for k, n in zip(_ints(arr.gap_bins), _ints(arr.gap_counts), strict=True):
            gaps[k] = gaps.get(k, 0) + n
    want = bins.fine_bins(np.array([7.0] * 9 + [30.0] * 3))
    assert gaps == {int(k): int((want == k).sum()) for k in np.unique(want)}
    tokens: dict[int, int] = {}
    for arr in (first, second):
        for k, n in zip(_ints(arr.token_buckets), _ints(arr.token_counts), strict=True):
            tokens[k] = tokens.get(k, 0) + n
    expected: dict[int, int] = {}
    for t, n in [*((t, 1) for t in a), *zip(b, [3, 1, 2, 5], strict=True)]:
        expected[t // ARRIVAL_BUCKET_NS] = expected.get(t // ARRIVAL_BUCKET_NS, 0) + n
    assert tokens == expected and sum(tokens.values()) == 10 + 11


def test_a_binned_log_coarsens_past_its_cap_and_keeps_every_count() -> None:
    log = BinnedLog(cap=512)
    rng = np.random.default_rng(1)
    total = 0
    for i in range(2000):  # 2000 batches 10 ms apart, 3 of 20 bins each: 6000 rows through a 512-row log
        b = np.sort(rng.choice(20, size=3, replace=False)).astype(np.int64) + 200
        n = rng.integers(1, 9, size=3).astype(np.int64)
        log.add(T0 + i * 10 * MS, b, n)
        total += int(n.sum())
    assert int(log.fine().sum()) == total == log.total
    assert log.t.size <= 512 and log.grid_ns > 500 * MS
    # a window's counts are exact to the (coarsened) grid: the first half holds about half
    half = int(log.fine(None, T0 + 10_000 * MS).sum())
    assert abs(half - total / 2) < total * 0.15


def test_a_binned_log_of_every_bin_stays_bounded() -> None:
    log = BinnedLog(cap=64)  # less than one row per bin: coarsening stops at one grid step over everything
    for i in range(300):
        log.add(T0 + i * MS, np.arange(i % bins.N_FINE, i % bins.N_FINE + 1), np.ones(1, dtype=np.int64))
    assert int(log.fine().sum()) == 300 and log.t.size <= 2 * bins.N_FINE
