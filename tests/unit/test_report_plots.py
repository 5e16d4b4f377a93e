"""The report plot (SVG) of a results document: valid XML, one point per steady level, the knee marked."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.engine_helpers import tokentop
from tests.unit.results_data import frozen_results
from tui.engine.aggregate.level_histograms import compact_histogram
from tui.engine.results.build import histograms_of
from tui.engine.results.files import read_results, write_results
from tui.engine.results.model import Results
from tui.engine.results.plot import (
    PLOT_LEFT,
    level_name,
    log_ticks,
    nice_ceiling,
    plotted_levels,
    throughput_svg,
    write_plot,
    x_positions,
)

NS = {"s": "http://www.w3.org/2000/svg"}


def _results(*, rate: bool = False, both: bool = False) -> Results:
    return frozen_results(rate=rate, both=both, model="org/sim-<llama>&8b")  # escaped in the SVG


def _with_histograms(results: Results) -> Results:
    """Each level given histograms whose shape moves with its load (TTFT grows with concurrency)."""
    rng = np.random.default_rng(7)
    levels = []
    for k, lv in enumerate(results.levels, 1):
        raw: dict[str, Any] = {
            "ttft": compact_histogram(rng.lognormal(np.log(40.0 * k), 0.3, 30 + k)),
            "itl": compact_histogram(np.append(rng.lognormal(np.log(12.0), 0.5, 300), [0.0, 0.0])),
            "e2el": compact_histogram(rng.lognormal(np.log(900.0 + 100 * k), 0.2, 30 + k)),
        }
        levels.append(replace(lv, histograms=histograms_of(raw)))
    return replace(results, levels=tuple(levels))


def _svg(results: Results) -> ET.Element:
    return ET.fromstring(throughput_svg(results))


def _points(root: ET.Element) -> list[tuple[float, float]]:
    (line,) = root.findall(".//s:polyline", NS)
    return [(float(x), float(y)) for x, y in (p.split(",") for p in line.attrib["points"].split())]


def test_one_point_per_steady_level_and_the_knee_marked() -> None:
    results = _results()
    steady = [lv for lv in results.levels if lv.steady and lv.output_throughput is not None]
    assert 0 < len(steady) < len(results.levels)  # the frozen run has a level that is not steady
    root = _svg(results)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    pts = _points(root)
    assert len(pts) == len(steady)
    circles = root.findall(".//s:circle[@class='point']", NS)
    assert [int(c.attrib["data-level"]) for c in circles] == [lv.level_id for lv in steady]
    assert pts == sorted(pts)  # by concurrency, left to right
    # the higher throughput is higher up (smaller y)
    tps = [lv.output_throughput or 0.0 for lv in steady]
    by_tps = sorted(zip(pts, tps, strict=True), key=lambda t: t[1])
    assert [p[1] for p, _ in by_tps] == sorted((p[1] for p, _ in by_tps), reverse=True)
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    knee = results.saturation.knee
    assert knee is not None
    assert len(root.findall(".//s:circle[@class='knee']", NS)) == 1 and f"knee: c={knee.value:g}" in texts
    assert any("org/sim-<llama>&8b" in t for t in texts)
    assert "(log scale)" in " ".join(texts)
    # the table: a row per level with TTFT and ITL p50/p99, the unplotted level said why
    assert {"TTFT p50", "TTFT p99", "ITL p50", "ITL p99"} <= set(texts)
    assert sum(t.startswith("c=") for t in texts) == len(results.levels)
    assert "(not plotted: not steady)" in texts


def test_the_latency_table_gives_each_level_a_row_of_its_own() -> None:
    """Each level's row sits below the one before, its figures on its own line: the table is read by row."""
    results = _results()
    texts = list(_svg(results).iter("{http://www.w3.org/2000/svg}text"))
    ys = []
    for lv in results.levels:
        (name,) = [t for t in texts if "".join(t.itertext()) == level_name(lv)
                   and float(t.attrib["x"]) == PLOT_LEFT and t.attrib["text-anchor"] == "start"]  # fmt: skip
        ys.append(float(name.attrib["y"]))
    header_y = next(float(t.attrib["y"]) for t in texts if "".join(t.itertext()) == "TTFT p99")
    assert len(results.levels) > 1 and ys == sorted(set(ys)) and header_y < ys[0]
    for lv, y in zip(results.levels, ys, strict=True):
        row = [t for t in texts if float(t.attrib["y"]) == y]
        assert len(row) == 7, level_name(lv)  # the name, five figures and the note: no other level's cells


def test_too_short_levels_and_null_rates_never_make_a_point() -> None:
    results = _results()
    first, second, *rest = results.levels
    first = replace(first, too_short=True, output_throughput=None, request_throughput=None)
    second = replace(second, output_throughput=None)
    results = replace(results, levels=(first, second, *rest))
    assert [lv.level_id for lv in plotted_levels(results)] == [lv.level_id for lv in rest if lv.steady]
    root = _svg(results)
    assert len(_points(root)) == len(plotted_levels(results))
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "(not plotted: too short)" in texts and "(not plotted: no rate)" in texts


def test_a_rate_sweep_and_a_run_with_nothing_steady() -> None:
    root = _svg(_results(rate=True))
    texts = " ".join("".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "request rate (req/s)" in texts and "r=2/s" in texts
    empty = _results()
    empty = replace(empty, levels=tuple(replace(lv, steady=False) for lv in empty.levels))
    root = _svg(empty)
    assert root.findall(".//s:polyline", NS) == [] and "no steady level to plot" in throughput_svg(empty)
    root = _svg(replace(empty, levels=()))  # a results file with no level at all still makes a valid file
    assert root.findall(".//s:polyline", NS) == []


def test_a_run_with_both_modes_plots_one_series_per_mode_on_its_own_axis() -> None:
    """After `m` in the app a run has concurrency levels then rate levels: each mode gets its own panel and
    x axis; a rate level never sits on the users axis (r=8/s at x=8 among c=8)."""
    results = _results(both=True)
    assert results.modes == ("concurrency", "rate")
    root = _svg(results)
    panels = {g.attrib["data-mode"]: g for g in root.findall("s:g[@class='panel']", NS)}
    assert set(panels) == {"concurrency", "rate"}
    by_id = {lv.level_id: lv for lv in results.levels}
    for mode, g in panels.items():
        ids = [int(c.attrib["data-level"]) for c in g.findall("s:circle[@class='point']", NS)]
        assert ids and all(by_id[i].mode == mode for i in ids), mode
        assert ids == [lv.level_id for lv in plotted_levels(results, mode)]  # type: ignore[arg-type]
        (line,) = g.findall("s:polyline", NS)
        assert line.attrib["data-mode"] == mode
        (title,) = ["".join(t.itertext()) for t in g.findall("s:text[@class='xtitle']", NS)]
        assert title.startswith("concurrency (users)" if mode == "concurrency" else "request rate (req/s)")
    # the panels do not overlap: the rate panel's points are all below the users panel's axis
    users_y = [float(c.attrib["cy"]) for c in panels["concurrency"].findall("s:circle[@class='point']", NS)]
    rate_y = [float(c.attrib["cy"]) for c in panels["rate"].findall("s:circle[@class='point']", NS)]
    assert max(users_y) < min(rate_y)
    # a run of one mode has one panel, as before
    assert len(_svg(_results()).findall("s:g[@class='panel']", NS)) == 1


@pytest.mark.parametrize(
    ("x", "top"), [(0, 1), (176, 200), (201, 250), (1000, 1000), (0.3, 0.5), (4100, 5000)]
)
def test_nice_ceiling(x: float, top: float) -> None:
    assert nice_ceiling(x) == pytest.approx(top)


def test_x_positions() -> None:
    xs, log = x_positions([1, 2, 4, 8], 0, 300)
    assert log and xs == pytest.approx([0, 100, 200, 300])
    xs, log = x_positions([2, 3, 4], 0, 100)
    assert not log and xs == pytest.approx([0, 50, 100])
    assert x_positions([5], 0, 100) == ([50.0], False)
    assert x_positions([], 0, 100) == ([], False)


def test_from_a_saved_results_file(tmp_path: Path) -> None:
    results = _results()
    saved = write_results(results, tmp_path / "run.json")
    r = tokentop("plot", str(saved))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "run.svg")
    assert (tmp_path / "run.svg").read_text(encoding="utf-8") == throughput_svg(read_results(saved))
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    r = tokentop("plot", str(bad), "--out", str(tmp_path / "x.svg"))
    assert r.returncode == 1 and not (tmp_path / "x.svg").exists()
    assert "not a tokentop results file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    out = write_plot(results, tmp_path / "direct.svg")
    assert not (tmp_path / "direct.svg.tmp").exists() and ET.parse(out).getroot() is not None


def test_the_histogram_panels_are_drawn_from_the_saved_counts_alone(tmp_path: Path) -> None:
    results = _with_histograms(_results())
    saved = write_results(results, tmp_path / "run.json")
    svg = throughput_svg(read_results(saved))  # from the file: the same panels
    assert svg == throughput_svg(results)
    root = ET.fromstring(svg)
    panels = root.findall("s:g[@class='hist']", NS)
    assert len(panels) == 3 * len(results.levels)
    by_level = {lv.level_id: lv for lv in results.levels}
    for g in panels:
        lv = by_level[int(g.attrib["data-level"])]
        assert lv.histograms is not None
        counts = getattr(lv.histograms, g.attrib["data-metric"]).counts
        bars = g.findall("s:rect[@class='bar']", NS)
        assert int(g.attrib["data-n"]) == sum(counts) == sum(int(b.attrib["data-count"]) for b in bars)
        assert len(bars) == sum(1 for c in counts if c)
        assert len(g.findall("s:line[@class='p50']", NS)) == len(g.findall("s:line[@class='p99']", NS)) == 1
        assert all(float(b.attrib["height"]) > 0 for b in bars)
    # one log axis per column: the level with the higher TTFT has its tallest bar further right
    ttft = [g for g in panels if g.attrib["data-metric"] == "ttft"]

    def peak_x(g: ET.Element) -> float:
        bars = g.findall("s:rect[@class='bar']", NS)
        return float(max(bars, key=lambda b: int(b.attrib["data-count"])).attrib["x"])

    assert peak_x(ttft[0]) < peak_x(ttft[-1])
    texts = " ".join("".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "TTFT" in texts and "ITL (chunk gap)" in texts and "E2E" in texts
    assert root.attrib["height"] == root.attrib["viewBox"].split()[-1]


def test_a_results_file_from_before_histograms_gets_a_note() -> None:
    root = _svg(_results())
    assert root.findall("s:g[@class='hist']", NS) == []
    assert "no latency histograms in these results" in throughput_svg(_results())


@pytest.mark.parametrize(
    ("lo", "hi", "ticks"),
    [
        (0.1, 1000.0, [0.1, 1, 10, 100, 1000]),  # decades
        (15.0, 90.0, [20, 50]),  # under two decades: 1, 2, 5 steps
        (120.0, 400.0, [120, 400]),  # not two of those either: the ends
    ],
)
def test_log_ticks(lo: float, hi: float, ticks: list[float]) -> None:
    assert log_ticks(lo, hi) == pytest.approx(ticks)
