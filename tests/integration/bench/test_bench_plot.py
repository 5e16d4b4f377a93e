"""`tokentop bench --plot`: an SVG beside the results, one point per steady level of that same document."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.engine_helpers import bench

pytestmark = pytest.mark.timeout(90)
NS = {"s": "http://www.w3.org/2000/svg"}
SIM = ["--sim-profile", "tiny-cpu", "--sim-time-scale", "10", "--isl", "32", "--osl", "16"]


def test_bench_writes_the_plot_of_its_results(tmp_path: Path) -> None:
    out, plot = tmp_path / "results.json", tmp_path / "curve.svg"
    args = ["--concurrency", "1,4", "--requests", "12", *SIM, "--output", str(out), "--plot", str(plot)]
    r = bench(*args, timeout_s=80)
    assert r.returncode == 0, r.stderr
    assert f"plot written to {plot}" in r.stderr
    results = json.loads(out.read_text())
    steady = [lv for lv in results["levels"] if lv["steady"] and lv["output_throughput"] is not None]
    root = ET.parse(plot).getroot()
    circles = root.findall(".//s:circle[@class='point']", NS)
    assert [int(c.attrib["data-level"]) for c in circles] == [lv["level_id"] for lv in steady]
    assert len(steady) == 2  # both levels of this sweep settle (as in test_bench's sweep)
    (line,) = root.findall(".//s:polyline", NS)
    assert len(line.attrib["points"].split()) == len(steady)
    # the histogram panels: every level's TTFT, ITL and E2E, counting what its results saved
    panels = {
        (int(g.attrib["data-level"]), g.attrib["data-metric"]): g
        for g in root.findall("s:g[@class='hist']", NS)
    }
    assert set(panels) == {(lv["level_id"], k) for lv in results["levels"] for k in ("ttft", "itl", "e2el")}
    for lv in results["levels"]:
        assert int(panels[(lv["level_id"], "e2el")].attrib["data-n"]) == lv["completed"] > 0
        assert (
            int(panels[(lv["level_id"], "itl")].attrib["data-n"])
            == sum(lv["histograms"]["itl"]["counts"])
            > 0
        )


def test_an_unwritable_plot_is_one_line_and_exit_1_with_the_results_kept(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    (tmp_path / "plot.svg.tmp").mkdir()  # the atomic write's temporary file cannot be created
    args = [
        "--concurrency",
        "1",
        "--requests",
        "4",
        *SIM,
        "--output",
        str(out),
        "--plot",
        str(tmp_path / "plot.svg"),
    ]
    r = bench(*args, timeout_s=80)
    assert r.returncode == 1, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("tokentop: error:")]
    assert len(errors) == 1 and "cannot write the plot" in errors[0], r.stderr
    assert "Traceback" not in r.stderr and json.loads(out.read_text())["levels"]
