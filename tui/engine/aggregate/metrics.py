"""Metrics from raw request records: pure, vectorised numpy functions (table-tested).

Conventions (the same as `vllm bench serve` where it has a name for the figure):

- TTFT = first content chunk (content or reasoning) - request sent.
- E2E latency = end of stream - request sent.
- ITL ``chunk`` = gaps between consecutive content chunks of a request, all gaps pooled (vLLM ``itl``).
- ITL ``tpot`` = (E2E - TTFT) / (OSL - 1), one value per request with OSL > 1 (vLLM ``tpot``).
- ITL ``e2e`` = E2E / OSL, one value per request, TTFT included (LLMPerf's inter-token latency).
- tokens per chunk = OSL / content chunks (more than 1 with speculative decoding or a stream interval).
- per-request output speed = (OSL - 1) / (E2E - TTFT) tokens/s, i.e. 1000 / TPOT.
- Stats: mean, population std (numpy's default, as vLLM), min, max and linear-interpolated percentiles
  (``numpy.percentile``'s default, as vLLM).

Latencies are in milliseconds. Histograms use fixed, log-spaced edges so a plot's axis never jumps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate.intervals import order_ranks, quantile_interval
from tui.engine.bins import FINE_CENTERS_MS as FINE_CENTERS_MS
from tui.engine.bins import FINE_EDGES_MS as FINE_EDGES_MS
from tui.engine.bins import FINE_PER_DECADE as FINE_PER_DECADE
from tui.engine.bins import N_FINE as N_FINE
from tui.engine.bins import fine_bins as fine_bins
from tui.engine.snapshot import Knee, LevelView, Stats

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)

DISPLAY_EDGES_MS: FloatArray = 10.0 ** np.linspace(-1.0, 5.0, 6 * 10 + 1)
"""What snapshots carry: 0.1 ms to 100 s, 10 bins per decade; values outside go to the end bins. Every
display edge is also a fine edge, so display counts are exact sums of fine counts."""
N_DISPLAY = len(DISPLAY_EDGES_MS) - 1
_FINE_TO_DISPLAY: IntArray = np.clip((np.arange(N_FINE) - FINE_PER_DECADE) // 5, 0, N_DISPLAY - 1)


# --- stats --------------------------------------------------------------------------------------


def stats(values: npt.ArrayLike) -> Stats:
    """Summary of ``values`` (NaNs dropped); an empty input gives ``Stats()`` (n=0, NaNs)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size and np.isnan(v).any():
        v = v[~np.isnan(v)]
    if v.size == 0:
        return Stats()
    p50, p90, p95, p99 = np.percentile(v, PERCENTILES)
    ordered = np.sort(v)
    return Stats(
        n=int(v.size),
        mean=float(v.mean()),
        std=float(v.std()),
        min=float(v.min()),
        max=float(v.max()),
        p50=float(p50),
        p90=float(p90),
        p95=float(p95),
        p99=float(p99),
        intervals=tuple(quantile_interval(ordered, q / 100) for q in PERCENTILES),
    )


@dataclass
class Moments:
    """Running count, sum, sum of squares, min and max: exact mean/std/min/max without keeping samples."""

    n: int = 0
    total: float = 0.0
    total_sq: float = 0.0
    lo: float = float("inf")
    hi: float = float("-inf")

    def add(self, v: FloatArray) -> None:
        """Fold ``v`` in."""
        if v.size:
            self.n += int(v.size)
            self.total += float(v.sum())
            self.total_sq += float(np.dot(v, v))
            self.lo = min(self.lo, float(v.min()))
            self.hi = max(self.hi, float(v.max()))

    def merge(self, other: Moments) -> None:
        """Fold another set of moments in."""
        self.n += other.n
        self.total += other.total
        self.total_sq += other.total_sq
        self.lo = min(self.lo, other.lo)
        self.hi = max(self.hi, other.hi)


def fine_histogram(values: FloatArray) -> IntArray:
    """Counts of ``values`` over the fine edges."""
    return np.bincount(fine_bins(values), minlength=N_FINE).astype(np.int64)


def display_counts_from_fine(fine: IntArray) -> IntArray:
    """Display-bin counts as sums of fine-bin counts (exact: display edges are fine edges)."""
    return np.bincount(_FINE_TO_DISPLAY, weights=fine, minlength=N_DISPLAY).astype(np.int64)


def display_counts(values: FloatArray) -> IntArray:
    """Counts of ``values`` over the display edges (out-of-range values in the end bins)."""
    idx = np.searchsorted(DISPLAY_EDGES_MS, values, side="right") - 1
    return np.bincount(np.clip(idx, 0, N_DISPLAY - 1), minlength=N_DISPLAY).astype(np.int64)


def hist_percentiles(fine: IntArray, qs: Sequence[float], lo: float, hi: float) -> list[float]:
    """Percentiles from fine-bin counts, interpolated geometrically inside the bin and clamped to the
    exact [lo, hi]. Relative error is at most one bin width (~4.7%)."""
    total = int(fine.sum())
    if total == 0:
        return [float("nan")] * len(qs)
    cum = np.cumsum(fine)
    out = []
    for q in qs:
        rank = q / 100.0 * total
        b = int(np.searchsorted(cum, rank, side="left"))
        b = min(b, N_FINE - 1)
        before = cum[b - 1] if b > 0 else 0
        inside = fine[b]
        frac = 0.5 if inside == 0 else (rank - before) / inside
        left, right = FINE_EDGES_MS[b], FINE_EDGES_MS[b + 1]
        value = float(left * (right / left) ** min(max(frac, 0.0), 1.0))
        out.append(min(max(value, lo), hi))
    return out


def stats_from_fine(fine: IntArray, moments: Moments) -> Stats:
    """Stats when only a fine histogram and running moments are kept (long runs): mean/std/min/max exact,
    percentiles within one bin."""
    if moments.n == 0:
        return Stats()
    mean = moments.total / moments.n
    var = max(moments.total_sq / moments.n - mean * mean, 0.0)
    p50, p90, p95, p99 = hist_percentiles(fine, PERCENTILES, moments.lo, moments.hi)
    return Stats(
        n=moments.n,
        mean=mean,
        std=float(np.sqrt(var)),
        min=moments.lo,
        max=moments.hi,
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
        intervals=tuple(_binned_interval(fine, moments, q / 100) for q in PERCENTILES),
    )


def _binned_interval(fine: IntArray, moments: Moments, q: float) -> tuple[float, float] | None:
    """`quantile_interval` for binned samples: the order statistics of its ranks, read from the histogram."""
    ranks = order_ranks(moments.n, q)
    if ranks is None:
        return None
    at = [100.0 * r / max(1, moments.n - 1) for r in ranks]
    lo, hi = hist_percentiles(fine, at, moments.lo, moments.hi)
    return lo, hi


def moments_from_fine(fine: IntArray) -> Moments:
    """Moments of binned samples, each standing at its bin's middle (`FINE_CENTERS_MS`)."""
    mom = Moments()
    nz = np.flatnonzero(fine)
    if nz.size:
        w = fine[nz].astype(np.float64)
        c = FINE_CENTERS_MS[nz]
        mom.n = int(w.sum())
        mom.total = float(np.dot(w, c))
        mom.total_sq = float(np.dot(w, c * c))
        mom.lo, mom.hi = float(FINE_EDGES_MS[nz[0]]), float(FINE_EDGES_MS[nz[-1] + 1])
    return mom


def stats_from_counts(fine: IntArray) -> Stats:
    """Stats of samples known only as fine-bin counts (what the workers send): every figure within one bin."""
    return stats_from_fine(fine, moments_from_fine(fine))


# --- per-request figures ------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestFigures:
    """Per-request figures of a set of successful requests (arrays aligned by request), in ms."""

    ttft_ms: FloatArray
    e2e_ms: FloatArray
    tpot_ms: FloatArray
    """NaN where OSL <= 1."""
    itl_e2e_ms: FloatArray
    """NaN where OSL < 1."""
    tokens_per_chunk: FloatArray
    """NaN where there were no content chunks."""
    decode_tps: FloatArray
    """(OSL - 1) / (E2E - TTFT) in tokens/s; NaN where undefined."""


def request_figures(
    sent_ns: npt.ArrayLike,
    first_content_ns: npt.ArrayLike,
    end_ns: npt.ArrayLike,
    output_tokens: npt.ArrayLike,
    n_chunks: npt.ArrayLike,
) -> RequestFigures:
    """Vectorised per-request figures. ``first_content_ns`` may hold NaN (no content: TTFT undefined)."""
    sent = np.asarray(sent_ns, dtype=np.float64)
    first = np.asarray(first_content_ns, dtype=np.float64)
    end = np.asarray(end_ns, dtype=np.float64)
    osl = np.asarray(output_tokens, dtype=np.float64)
    chunks = np.asarray(n_chunks, dtype=np.float64)
    ttft = (first - sent) / 1e6
    e2e = (end - sent) / 1e6
    with np.errstate(divide="ignore", invalid="ignore"):
        decode = e2e - ttft
        tpot = np.where(osl > 1, decode / (osl - 1), np.nan)
        itl_e2e = np.where(osl >= 1, e2e / osl, np.nan)
        tpc = np.where(chunks > 0, osl / chunks, np.nan)
        decode_tps = np.where((osl > 1) & (decode > 0), (osl - 1) / (decode / 1e3), np.nan)
    return RequestFigures(ttft, e2e, tpot, itl_e2e, tpc, decode_tps)


def chunk_gaps_ms(chunk_ns: npt.ArrayLike) -> FloatArray:
    """Gaps between consecutive content chunks of one request (vLLM's ``itl``), ms."""
    c = np.asarray(chunk_ns, dtype=np.int64)
    if c.size < 2:
        return np.empty(0, dtype=np.float64)
    return np.diff(c).astype(np.float64) / 1e6


def chunk_token_weights(
    n_chunks: int, output_tokens: int | None, chunk_tokens: Sequence[int] | None
) -> FloatArray:
    """Output tokens carried by each content chunk: the server's per-chunk counts when it gave them, else the
    usage total spread evenly over the chunks, else one per chunk."""
    if n_chunks == 0:
        return np.empty(0, dtype=np.float64)
    if chunk_tokens is not None and len(chunk_tokens) == n_chunks:
        return np.asarray(chunk_tokens, dtype=np.float64)
    per = (output_tokens / n_chunks) if output_tokens else 1.0
    return np.full(n_chunks, per, dtype=np.float64)


def good_mask(
    ttft_ms: FloatArray,
    tpot_ms: FloatArray,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    e2e_ms: FloatArray | None = None,
    slo_e2e_ms: float | None = None,
) -> npt.NDArray[np.bool_]:
    """Requests meeting every given SLO (vLLM goodput: TPOT counts as 0 when OSL <= 1; a request with no
    content has no TTFT and misses a TTFT objective)."""
    good = np.ones(ttft_ms.shape, dtype=bool)
    if slo_e2e_ms is not None and e2e_ms is not None:
        good &= e2e_ms <= slo_e2e_ms
    if slo_ttft_ms is not None:
        good &= ttft_ms <= slo_ttft_ms
    if slo_tpot_ms is not None:
        good &= np.nan_to_num(tpot_ms, nan=0.0) <= slo_tpot_ms
    return good


# --- steady state and saturation ----------------------------------------------------------------


def steady_from_ns(
    level_start_ns: int,
    median_e2e_ns: float | None,
    earlier_in_flight: int,
    earlier_last_end_ns: int | None,
) -> int | None:
    """Start of a load level's steady-state window, or None while the level is still in its transient.

    Rule: the window starts once (a) every request begun under an earlier level has ended (they load the
    server differently, so their tail is part of the transient) and (b) at least one median E2E latency of
    this level has passed since the level began (``level_start_ns``: when every worker had applied it); by
    then the requests in flight were all started under this level, so the server carries this level's
    load. It is ``max(last earlier end, start + median E2E)``; None while an earlier request is still in
    flight or no request of this level has finished. The window ends at the next load change (or, while
    the level runs, where its data is complete: the oldest request still in flight).
    """
    if earlier_in_flight > 0 or median_e2e_ns is None or not np.isfinite(median_e2e_ns):
        return None
    start = level_start_ns + int(median_e2e_ns)
    if earlier_last_end_ns is not None:
        start = max(start, earlier_last_end_ns)
    return start


KNEE_TOLERANCE = 0.05
KNEE_RULE = (
    "the lowest load whose steady output throughput is within noise of the best measured (within {tol:.0%} "
    "of it, or its 95 % interval reaching the best's), provided a higher load was also measured and the "
    "plateau is seen beyond noise (that level's own interval within {tol:.0%} of its figure); "
    "levels where the client limited the load take no part"
)


def find_knee(levels: Sequence[LevelView], tolerance: float = KNEE_TOLERANCE) -> Knee | None:
    """Where more load stops buying throughput.

    Rule (`KNEE_RULE`): among steady levels of the mode of the last level (for a value measured more than
    once, its latest steady level), the knee is the lowest load on the plateau: within ``tolerance`` (5 %)
    of the best output tokens/s, or not distinguishable from it (its interval, `LevelView.output_tps_ci`,
    reaches the best's), provided some higher load was measured too (if the best is only reached at the
    highest load, the curve is still climbing) and the knee's own figure is known to within ``tolerance``
    (else "within noise" would only say the level is too noisy to tell: no knee yet). A level without an
    interval (a window under 4 s) is taken at its figure. A level where the client limited the load
    (`LevelView.client_limited`) measured the client: it takes no part.
    """
    points = _knee_points(levels)
    at = _plateau_start(points, tolerance)
    if at is None or at == len(points) - 1 or not _known_within(points[at], tolerance):
        return None
    p = points[at]
    return Knee(
        level_id=p.level_id,
        value=p.value,
        output_tps=p.output_tps,
        peak_tps=max(q.output_tps for q in points),
        rule=KNEE_RULE.format(tol=tolerance),
    )


def _knee_points(levels: Sequence[LevelView]) -> list[LevelView]:
    """The levels the knee is taken from, by load: steady, of the last level's mode, not the client's, and
    for a value measured more than once its latest such level."""
    if not levels:
        return []
    mode = levels[-1].mode
    by_value: dict[float, LevelView] = {}
    for lv in levels:
        if lv.mode == mode and lv.steady and np.isfinite(lv.output_tps) and not lv.client_limited:
            by_value[lv.value] = lv  # later levels win
    return sorted(by_value.values(), key=lambda lv: lv.value)


def _plateau_start(points: Sequence[LevelView], tolerance: float) -> int | None:
    """The index of the lowest load on the plateau: within ``tolerance`` of the best output tokens/s, or
    whose interval reaches the best's; None with fewer than two points or no throughput."""
    if len(points) < 2:
        return None
    best = max(points, key=lambda p: p.output_tps)
    if best.output_tps <= 0:
        return None
    for i, p in enumerate(points):
        ci, best_ci = p.output_tps_ci, best.output_tps_ci
        within_noise = ci is not None and best_ci is not None and ci[1] >= best_ci[0]
        if p.output_tps >= (1.0 - tolerance) * best.output_tps or within_noise:
            return i
    return None


@dataclass(frozen=True)
class NoKnee:
    """Why `find_knee` found none, each part true of the levels it names (their load values)."""

    client_limited: tuple[float, ...] = ()
    """Levels where the client limited the load: they measured the client, not the server."""
    unsteady: tuple[float, ...] = ()
    """Levels with no steady window (no throughput figure to compare)."""
    rising_at: float | None = None
    """The highest steady level is the best: the curve is still climbing there."""
    noisy_at: float | None = None
    """The plateau's first level, known only to wider than the tolerance."""


def why_no_knee(levels: Sequence[LevelView], tolerance: float = KNEE_TOLERANCE) -> NoKnee:
    """The reasons `find_knee` returns None for ``levels``, by the same rule (an empty `NoKnee`: too few
    levels to tell)."""
    if not levels:
        return NoKnee()
    mode = levels[-1].mode
    same = [lv for lv in levels if lv.mode == mode]
    points = _knee_points(levels)
    measured = {p.value for p in points}  # a value measured again, steady, is not named as a failure
    limited = tuple(lv.value for lv in same if lv.client_limited and lv.value not in measured)
    unsteady = tuple(
        lv.value
        for lv in same
        if not lv.client_limited
        and not (lv.steady and np.isfinite(lv.output_tps))
        and lv.value not in measured
    )
    at = _plateau_start(points, tolerance)
    rising_at = points[at].value if at is not None and at == len(points) - 1 else None
    noisy_at = (
        points[at].value
        if at is not None and at < len(points) - 1 and not _known_within(points[at], tolerance)
        else None
    )
    return NoKnee(limited, unsteady, rising_at, noisy_at)


def _known_within(lv: LevelView, tolerance: float) -> bool:
    """The level's throughput interval is within ``tolerance`` of its figure (or it has none)."""
    ci = lv.output_tps_ci
    return ci is None or (ci[1] - ci[0]) / 2 <= tolerance * lv.output_tps
