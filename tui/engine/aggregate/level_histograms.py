"""A level's latency histograms for the results: TTFT, E2E and ITL (vLLM's chunk gaps) over its window.

The population is exactly that of the level's latency statistics (`tui.engine.aggregate.levels.level_view`):
the successful requests *sent* inside the level's window, and the chunk gaps of those requests; so the saved
counts sum to what the stats describe (``completed`` while ``exact_stats``, else the uniform sample the stats
come from). The bins are the app's display bins (`metrics.DISPLAY_EDGES_MS`: 0.1 ms to 100 s, 10 per decade),
trimmed to the bins from the first to the last non-empty one so a level writes a few numbers, not 60; a value
beyond the grid widens the end bin to include it rather than be counted in a bin that does not hold it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate import metrics as m
from tui.engine.aggregate.levels import LevelAgg
from tui.engine.snapshot import LevelView

FloatArray = npt.NDArray[np.float64]

HISTOGRAM_METRICS: tuple[tuple[str, str], ...] = (("ttft", "ttft_ms"), ("e2el", "e2e_ms"), ("itl", "gap_ms"))
"""The results' name of each histogram (as its stats' prefix: ``itl`` is the chunk gap) and its column."""


def compact_histogram(values: FloatArray) -> dict[str, list[float] | list[int]]:
    """``{"edges_ms": [...], "counts": [...]}`` of ``values`` (NaNs dropped) over the display bins from the
    first to the last non-empty one; both lists empty without values. ``len(edges_ms) == len(counts) + 1``."""
    v = values[~np.isnan(values)]
    if v.size == 0:
        return {"edges_ms": [], "counts": []}
    counts = m.display_counts(v)
    nonzero = np.flatnonzero(counts)
    lo, hi = int(nonzero[0]), int(nonzero[-1])
    edges = [float(e) for e in m.DISPLAY_EDGES_MS[lo : hi + 2]]
    edges[0] = min(edges[0], float(v.min()))  # out-of-range values were counted in the end bins
    edges[-1] = max(edges[-1], float(np.nextafter(v.max(), np.inf)))
    return {"edges_ms": edges, "counts": [int(c) for c in counts[lo : hi + 1]]}


def window_ns(view: LevelView, t0_ns: int) -> tuple[int, int] | None:
    """The level's window in `perf_counter_ns`, as whole nanoseconds again. The view keeps it as float
    seconds from ``t0_ns``; rounding back is exact (float64 keeps a run second to well under half a
    nanosecond for runs shorter than ten days), so the selection is the stats' own, boundary requests
    included."""
    if view.window_from_s is None or view.window_to_s is None:
        return None
    return t0_ns + round(view.window_from_s * 1e9), t0_ns + round(view.window_to_s * 1e9)


def compact_fine(fine: npt.NDArray[np.int64]) -> dict[str, list[float] | list[int]]:
    """`compact_histogram` of samples known only as fine-bin counts (the workers' arrivals)."""
    counts = m.display_counts_from_fine(fine)
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        return {"edges_ms": [], "counts": []}
    lo, hi = int(nonzero[0]), int(nonzero[-1])
    edges = [float(e) for e in m.DISPLAY_EDGES_MS[lo : hi + 2]]
    filled = np.flatnonzero(fine)
    edges[0] = min(edges[0], float(m.FINE_EDGES_MS[filled[0]]))
    edges[-1] = max(edges[-1], float(m.FINE_EDGES_MS[filled[-1] + 1]))
    return {"edges_ms": edges, "counts": [int(c) for c in counts[lo : hi + 1]]}


def level_histograms(lv: LevelAgg, view: LevelView, t0_ns: int) -> dict[str, dict[str, Any]]:
    """The TTFT, E2E and chunk-gap ITL histograms of ``view``'s window, read from ``lv`` (the aggregate the
    view was made from, not changed since: call both under the same lock). A level measured over arrivals
    counts its TTFTs and gaps by arrival in the window and its E2E over the requests that ended in it."""
    empty = np.empty(0, dtype=np.float64)
    span = window_ns(view, t0_ns)
    if view.measured_over == "arrivals" and span is not None:
        since = view.ttft_since_s
        ttft_from_ns = span[0] if since is None else t0_ns + round(since * 1e9)
        rows = lv.req.view()
        ended = (rows["end_ns"] >= span[0]) & (rows["end_ns"] < span[1])
        return {
            "ttft": compact_fine(lv.ttft_log.fine(ttft_from_ns, span[1])),
            "e2el": compact_histogram(rows["e2e_ms"][ended]),
            "itl": compact_fine(lv.gap_log.fine(*span)),
        }
    rows = lv.req.view()
    gaps = lv.gaps.view()
    out: dict[str, dict[str, Any]] = {}
    for name, column in HISTOGRAM_METRICS:
        table = gaps if column == "gap_ms" else rows
        if span is None:
            values = empty
        else:
            sel = (table["sent_ns"] >= span[0]) & (table["sent_ns"] < span[1])
            values = table[column][sel]
        out[name] = compact_histogram(values)
    return out
