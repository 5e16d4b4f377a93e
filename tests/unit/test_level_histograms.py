"""A level's saved latency histograms: the display bins trimmed to what holds data, every value in a bin
that holds it, and the results file reading them back (old files without them too)."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.support import frozen
from tests.unit.results_data import frozen_results
from tui.engine.aggregate import metrics as m
from tui.engine.aggregate.level_histograms import compact_histogram, window_ns
from tui.engine.results.build import histograms_of
from tui.engine.results.files import ResultsFileError, read_results, to_json, write_results
from tui.engine.results.model import Histogram


def _bins_of(h: dict[str, list[float] | list[int]], values: np.ndarray) -> list[int]:
    edges = np.asarray(h["edges_ms"], dtype=np.float64)
    idx = np.searchsorted(edges, values, side="right") - 1
    assert ((idx >= 0) & (idx < edges.size - 1)).all(), "a value outside the saved bins"
    return [int(c) for c in np.bincount(idx, minlength=edges.size - 1)]


@pytest.mark.parametrize(
    "values",
    [
        [120.0, 130.0, 131.0, 480.0, 2000.0],  # a spread over decades, empty bins between kept
        [5.0] * 7,  # one bin
        [0.0, 0.0, 0.3, 1.2],  # gaps of 0 ms (two chunks in one read): the first bin starts at 0
        [0.001, 250_000.0, 50.0],  # beyond 0.1 ms .. 100 s: the end bins widen to hold them
    ],
)
def test_every_value_in_the_bin_that_holds_it_and_the_bins_trimmed(values: list[float]) -> None:
    v = np.asarray(values, dtype=np.float64)
    h = compact_histogram(np.append(v, np.nan))  # a NaN (no TTFT: no text) is not counted
    edges, counts = h["edges_ms"], h["counts"]
    assert len(edges) == len(counts) + 1 and all(b > a for a, b in pairwise(edges))
    assert sum(counts) == v.size and counts[0] > 0 and counts[-1] > 0
    assert _bins_of(h, v) == counts
    # the inner edges are the app's display edges
    assert all(np.isclose(m.DISPLAY_EDGES_MS, e).any() for e in edges[1:-1])


def test_no_values_no_bins() -> None:
    assert compact_histogram(np.array([np.nan])) == {"edges_ms": [], "counts": []}


def test_the_window_in_whole_nanoseconds_again() -> None:
    lv = frozen.snapshot().levels[0]
    t0 = 8_123_456_789_012_345  # a perf_counter_ns days into a machine's uptime
    for a, b in ((1, 2), (123_456_789_001, 987_654_321_777), (3_600_000_000_001, 3_600_100_000_000),
                 (863_999_999_999_999, 864_000_000_000_007)):  # fmt: skip
        view = replace(lv, window_from_s=a / 1e9, window_to_s=b / 1e9)
        assert window_ns(view, t0) == (t0 + a, t0 + b)


def test_results_file_reads_the_histograms_and_files_without_them(tmp_path: Path) -> None:
    raw = {
        "ttft": compact_histogram(np.array([100.0, 110.0, 400.0])),
        "e2el": compact_histogram(np.array([900.0, 1100.0, 1500.0])),
        "itl": compact_histogram(np.array([], dtype=np.float64)),
    }
    results = frozen_results()
    results = replace(
        results, levels=tuple(replace(lv, histograms=histograms_of(raw)) for lv in results.levels)
    )
    read = read_results(write_results(results, tmp_path / "new.json"))
    h = read.levels[0].histograms
    assert h is not None and h.ttft.total == 3
    assert h.ttft.edges_ms == tuple(raw["ttft"]["edges_ms"])
    assert h.e2el.counts == (1, 1, 1)
    assert h.itl == Histogram(edges_ms=(), counts=())
    # a file from before histograms were saved still reads, with none
    doc = to_json(results)
    for level in doc["levels"]:
        del level["histograms"]
    (tmp_path / "old.json").write_bytes(orjson.dumps(doc))
    old = read_results(tmp_path / "old.json")
    assert all(x.histograms is None for x in old.levels)


@pytest.mark.parametrize(
    ("hist", "says"),
    [
        ({"edges_ms": [1.0, 2.0], "counts": [1, 2]}, "2 edges for 2 counts"),
        ({"edges_ms": [2.0, 1.0], "counts": [1]}, "edges must rise"),
        ({"edges_ms": [1.0, 2.0], "counts": [-1]}, "none negative"),
        ({"edges_ms": ["a", 2.0], "counts": [1]}, "expected a number"),
        ({"counts": [1]}, "no 'edges_ms'"),
    ],
)
def test_a_bad_histogram_is_one_line_naming_the_key(
    tmp_path: Path, hist: dict[str, object], says: str
) -> None:
    results = to_json(frozen_results())
    results["levels"][0]["histograms"] = {"ttft": hist, "e2el": hist, "itl": hist}
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(results))
    with pytest.raises(ResultsFileError) as err:
        read_results(path)
    message = str(err.value)
    assert "\n" not in message and says in message and "levels[0].histograms.ttft" in message
