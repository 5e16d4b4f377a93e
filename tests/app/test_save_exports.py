"""`s` in the live app against the real engine and the simulator: the results and, from that same document,
bench's exports (the level CSV, the vLLM-shaped file per level, the report plot), and a toast naming them."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from textual.notifications import Notification

from tests.app.conftest import settle
from tests.support.engine_helpers import running_handle, wait_for
from tui.app.app import TokentopApp
from tui.app.saving import saved_list
from tui.app.settings import AppSettings
from tui.app.themes import load_themes
from tui.engine.config import LoadTarget, WorkloadConfig
from tui.engine.results.files import read_results
from tui.engine.results.vllm import vllm_level
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)
NS = {"s": "http://www.w3.org/2000/svg"}


def _cell(value: Any) -> str:
    """A results value as the CSV writes it."""
    return "" if value is None else ("true" if value else "false") if isinstance(value, bool) else str(value)


async def test_s_writes_the_bench_exports_of_the_results_it_saved(tmp_path: Path) -> None:
    out = tmp_path / "saved"
    with (
        SimServer("flat", time_scale=4.0) as sim,
        running_handle(
            sim.url, LoadTarget(concurrency=2), tmp_path, workload=WorkloadConfig(isl=16, osl=24)
        ) as handle,
    ):
        wait_for(handle, lambda s: bool(s.levels) and s.levels[-1].steady, 40, "a steady level")
        handle.set_load(LoadTarget(concurrency=4))
        wait_for(handle, lambda s: len(s.levels) == 2 and s.levels[-1].steady, 40, "level 2 steady")
        log = tmp_path / "requests.jsonl"
        settings = AppSettings(themes=load_themes(), theme="dark", save_dir=out, requests_log=log,
                               tick_s=3600.0, plot_thread=False)  # fmt: skip
        app = TokentopApp(handle, settings)
        toasts: list[Notification] = []
        async with app.run_test() as pilot:
            await pilot.press("s")
            await settle(pilot)
            toasts = list(app._notifications)
    (results_path,) = out.glob("tokentop-*[0-9].json")
    results = json.loads(results_path.read_text())
    base = results_path.with_suffix("")
    levels = results["levels"]
    assert [lv["concurrency"] for lv in levels] == [2, 4] and all(lv["steady"] for lv in levels)
    # the level table: one row per level, each cell the results' value
    with base.with_suffix(".csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(levels)
    for row, lv in zip(rows, levels, strict=True):
        for key in ("level_id", "duration", "completed", "output_throughput", "p99_ttft_ms", "steady"):
            assert row[key] == _cell(lv[key]), key
    # one vLLM-shaped file per level: what the exporter makes of these results, and their own values
    vllm_files = sorted(base.with_name(base.name + "-vllm").glob("*.json"))
    assert len(vllm_files) == len(levels)
    by_id = {json.loads(p.read_text())["tokentop_level_id"]: json.loads(p.read_text()) for p in vllm_files}
    model = read_results(results_path)
    for lv, level in zip(levels, model.levels, strict=True):
        record = by_id[lv["level_id"]]
        assert record == json.loads(json.dumps(vllm_level(model, level)))
        assert record["output_throughput"] == lv["output_throughput"]
        assert record["completed"] == lv["completed"] and record["p99_ttft_ms"] == lv["p99_ttft_ms"]
    # the report plot: a point per steady level, and each level's histograms as saved
    root = ET.parse(base.with_name(base.name + "-plot.svg")).getroot()
    points = root.findall(".//s:circle[@class='point']", NS)
    assert [int(c.attrib["data-level"]) for c in points] == [lv["level_id"] for lv in levels]
    panels = {(int(g.attrib["data-level"]), g.attrib["data-metric"]): int(g.attrib["data-n"])
              for g in root.findall("s:g[@class='hist']", NS)}  # fmt: skip
    for lv in levels:
        assert panels[(lv["level_id"], "e2el")] == lv["completed"] == sum(lv["histograms"]["e2el"]["counts"])
    # the toast lists every file and the folder once
    (toast,) = [t for t in toasts if t.title == "saved"]
    listed = toast.message.splitlines()[0]
    for name in (results_path.name, f"{base.name}.csv", f"{base.name}-plot.svg", f"{base.name}.jsonl",
                 f"{base.name}.svg", f"{base.name}-vllm/ (2 files)"):  # fmt: skip
        assert name in listed.split(", "), (name, listed)


def test_saved_list_names_files_and_counts_a_folder_once(tmp_path: Path) -> None:
    paths = [
        tmp_path / "a.json",
        tmp_path / "a-vllm" / "x.json",
        tmp_path / "a-vllm" / "y.json",
        tmp_path / "a.svg",
    ]
    assert saved_list(paths, tmp_path) == "a.json, a-vllm/ (2 files), a.svg"
    assert saved_list([tmp_path / "d" / "x.json", Path("/elsewhere/b.svg")], tmp_path) == "d/ (1 file), b.svg"


async def test_after_m_the_saved_plot_has_a_panel_per_mode(tmp_path: Path) -> None:
    """`m` switches users to requests/s: `s` then plots each mode on its own axis, never a rate level among
    the users (the r=N/s level was drawn at x=N on the "concurrency (users)" axis)."""
    out = tmp_path / "saved"
    with (
        SimServer("flat", time_scale=4.0) as sim,
        running_handle(
            sim.url, LoadTarget(concurrency=2), tmp_path, workload=WorkloadConfig(isl=16, osl=24)
        ) as handle,
    ):
        wait_for(handle, lambda s: bool(s.levels) and s.levels[-1].steady, 40, "a steady users level")
        app = TokentopApp(handle, AppSettings(themes=load_themes(), theme="dark", save_dir=out, tick_s=0.2,
                          plot_thread=False))  # fmt: skip
        async with app.run_test() as pilot:
            await settle(pilot)
            await pilot.press("m")
            await settle(pilot)
            wait_for(
                handle,
                lambda s: s.levels[-1].mode == "rate" and s.levels[-1].steady,
                60,
                "a steady rate level after m",
            )
            await pilot.press("s")
            await settle(pilot)
    (results_path,) = out.glob("tokentop-*[0-9].json")
    modes = {lv["level_id"]: lv["mode"] for lv in json.loads(results_path.read_text())["levels"]}
    assert set(modes.values()) == {"concurrency", "rate"}
    root = ET.parse(results_path.with_name(results_path.stem + "-plot.svg")).getroot()
    panels = {g.attrib["data-mode"]: g for g in root.findall("s:g[@class='panel']", NS)}
    assert set(panels) == {"concurrency", "rate"}
    for mode, g in panels.items():
        points = [int(c.attrib["data-level"]) for c in g.findall("s:circle[@class='point']", NS)]
        assert points and all(modes[i] == mode for i in points), (mode, points)
        (title,) = ("".join(t.itertext()) for t in g.findall("s:text[@class='xtitle']", NS))
        assert title.startswith("concurrency (users)" if mode == "concurrency" else "request rate (req/s)")
