"""Scrapes over time -> figures: counter rates, windowed histogram quantiles, time-averaged gauges.

Pure functions of time-stamped points (`perf_counter_ns`, the engine's clock), so results can be computed
for any window: the live view's last few seconds or one load level's steady window.

- A counter only grows; a drop means the server restarted and counts again from zero, so that step's
  increase is the new value itself (Prometheus' `rate` does the same).
- A histogram's buckets are counters too: the window's distribution is the per-bucket increase, reset-aware
  pair by pair, and a quantile is read from it by linear interpolation inside the bucket that holds the rank
  (Prometheus' `histogram_quantile`): the lowest bucket starts at 0, a rank in the +Inf bucket answers the
  highest finite edge.
- A gauge is a reading at an instant; over an interval each reading holds until the next one (sample and
  hold), and the mean weights each by how long it held inside the interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from tui.engine.server_metrics.parse import Buckets

Point = tuple[int, float]
"""(t_ns, value)."""


def counter_increase(values: Sequence[float]) -> float:
    """How much a counter grew across consecutive readings, counting a drop as a restart from zero."""
    grown = 0.0
    for prev, cur in pairwise(values):
        grown += cur - prev if cur >= prev else cur
    return grown


def in_window(points: Sequence[Point], t_from_ns: int, t_to_ns: int) -> list[Point]:
    """The points with t_from_ns <= t <= t_to_ns (points sorted by time)."""
    return [p for p in points if t_from_ns <= p[0] <= t_to_ns]


def counter_rate(points: Sequence[Point], t_from_ns: int, t_to_ns: int) -> float | None:
    """Per-second increase of a counter over the readings inside [t_from_ns, t_to_ns]; None with fewer
    than two readings there (a rate needs an interval)."""
    inside = in_window(points, t_from_ns, t_to_ns)
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return counter_increase([v for _, v in inside]) / ((inside[-1][0] - inside[0][0]) / 1e9)


def ratio_of_increases(
    numerator: Sequence[Point], denominator: Sequence[Point], t_from_ns: int, t_to_ns: int
) -> float | None:
    """Increase of one counter over the increase of another in the same window (a hit rate, an acceptance
    rate); None when the denominator did not grow (nothing was asked, so there is no rate)."""
    num = [v for _, v in in_window(numerator, t_from_ns, t_to_ns)]
    den = [v for _, v in in_window(denominator, t_from_ns, t_to_ns)]
    if len(num) < 2 or len(den) < 2:
        return None
    grown = counter_increase(den)
    return counter_increase(num) / grown if grown > 0 else None


def histogram_increase(readings: Sequence[Buckets]) -> Buckets | None:
    """The observations a histogram gained across consecutive readings, per bucket, reset-aware: when
    the count drops (or the edges change) the server restarted and the newer reading is the increase."""
    if len(readings) < 2:
        return None
    edges = readings[-1].edges
    first, last = readings[0], readings[-1]
    if first.edges == edges and all(
        prev.edges == edges and cur.count >= prev.count for prev, cur in pairwise(readings)
    ):  # no restart inside: the increase is the last reading less the first (a level costs its length once)
        increase = tuple(max(0.0, c - p) for c, p in zip(last.cumulative, first.cumulative, strict=True))
        return Buckets(edges, increase, last.sum - first.sum)
    grown = [0.0] * len(edges)
    grown_sum = 0.0
    for prev, cur in pairwise(readings):
        if cur.edges != edges:
            continue  # a bucket layout that changed mid-window: only compare like with like
        if prev.edges != cur.edges or cur.count < prev.count:
            steps = list(cur.cumulative)
            step_sum = cur.sum
        else:
            steps = [max(0.0, c - p) for c, p in zip(cur.cumulative, prev.cumulative, strict=True)]
            step_sum = cur.sum - prev.sum
        grown = [g + s for g, s in zip(grown, steps, strict=True)]
        grown_sum += step_sum
    return Buckets(edges, tuple(grown), grown_sum)


def histogram_quantile(q: float, buckets: Buckets) -> float | None:
    """The q-quantile (0..1) of a cumulative histogram, interpolated linearly inside its bucket, as
    Prometheus' `histogram_quantile`; None when it holds no observation."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be within 0..1, got {q}")
    edges, cumulative = buckets.edges, buckets.cumulative
    if not edges or cumulative[-1] <= 0:
        return None
    total = cumulative[-1]
    rank = q * total
    for i, (edge, count) in enumerate(zip(edges, cumulative, strict=True)):
        if count >= rank and count > 0:
            if math.isinf(edge):
                finite = [e for e in edges if not math.isinf(e)]
                return finite[-1] if finite else None
            lower = edges[i - 1] if i > 0 else 0.0
            below = cumulative[i - 1] if i > 0 else 0.0
            if i == 0 and edge <= 0:
                return edge
            in_bucket = count - below
            if in_bucket <= 0:
                return edge
            return lower + (edge - lower) * (rank - below) / in_bucket
    return None


EXACT, BOUND, RANGE, ABOVE = "estimate", "bound", "range", "above"
"""What a quantile read from buckets is: a narrow bucket's interpolation, `< high` (the first bucket), a
range `low-high` (a bucket wider than the window's mean), or `> low` (the +Inf bucket)."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """A quantile from buckets with the edges of the bucket that holds it, so no midpoint of a coarse
    bucket is shown or saved as a measurement. `value` is the interpolation, usable only when `kind` is
    `estimate`; `low`/`high` are the bucket's edges (`high` is inf for the +Inf bucket)."""

    kind: str
    value: float
    low: float
    high: float

    @property
    def number(self) -> float | None:
        """The figure when the bucket is narrow enough to give one, else None."""
        return self.value if self.kind == EXACT else None

    def scaled(self, factor: float) -> Estimate:
        """The same estimate in another unit (seconds -> ms)."""
        return Estimate(self.kind, self.value * factor, self.low * factor, self.high * factor)


def quantile_estimate(q: float, buckets: Buckets) -> Estimate | None:
    """The q-quantile as `histogram_quantile` reads it, with the bucket's edges and what it can claim: a rank
    in the first bucket is only a bound (`< first edge`: every observation might sit at its bottom), as is a
    bucket wider than the window's mean (sum/count, exact), which gives a range; None when empty."""
    value = histogram_quantile(q, buckets)
    if value is None:
        return None
    edges, cumulative = buckets.edges, buckets.cumulative
    rank = q * cumulative[-1]
    i = next(i for i, count in enumerate(cumulative) if count >= rank and count > 0)
    if math.isinf(edges[i]):
        low = max((e for e in edges if not math.isinf(e)), default=0.0)
        return Estimate(ABOVE, value, low, math.inf)
    low = edges[i - 1] if i > 0 else 0.0
    if i == 0:
        return Estimate(BOUND, value, 0.0, edges[0])
    mean = buckets.sum / buckets.count if buckets.count > 0 else 0.0
    if edges[i] - low > mean:
        return Estimate(RANGE, value, low, edges[i])
    return Estimate(EXACT, value, low, edges[i])


def time_weighted_mean(points: Sequence[Point], t_from_ns: int, t_to_ns: int) -> float | None:
    """The mean of a gauge over [t_from_ns, t_to_ns], each reading holding until the next one.

    The reading last taken before t_from_ns holds into the interval; with none, the interval starts at the
    first reading inside it. None when no reading falls at or before t_to_ns."""
    if t_to_ns < t_from_ns:
        raise ValueError("t_to_ns is before t_from_ns")
    start_i = None
    for i, (t, _) in enumerate(points):
        if t <= t_from_ns:
            start_i = i
        else:
            break
    if start_i is None:
        if not points or points[0][0] > t_to_ns:
            return None
        start_i = 0
    area = 0.0
    covered = 0
    for i in range(start_i, len(points)):
        t, value = points[i]
        if t > t_to_ns:
            break
        seg_from = max(t, t_from_ns)
        seg_to = min(points[i + 1][0], t_to_ns) if i + 1 < len(points) else t_to_ns
        if seg_to > seg_from:
            area += value * (seg_to - seg_from)
            covered += seg_to - seg_from
    if covered == 0:
        return points[start_i][1]  # a zero-length interval: the reading in force
    return area / covered
