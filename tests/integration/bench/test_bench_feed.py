"""`bench --live-jsonl`, `--cost-per-hour` and the GPU's energy per token, against the simulator: one short
run serves every check of the live feed, the prices and the joules; a scripted engine a feed that fails."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import tui.bench.run as bench_run
from tests.conftest import made_once
from tests.support.engine_helpers import bench
from tests.support.scripted_engine import ScriptedEngine
from tui.bench.feed import LiveFeed
from tui.cli import build_parser
from tui.cli.bench import bench_config
from tui.configs import UsageError
from tui.engine.config import LoadTarget, TargetConfig
from tui.engine.host.probe import Probed

pytestmark = pytest.mark.timeout(120)
COST = 3.5
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two 3 s levels on the simulated H100 (time scale 10), priced, with an SLO, the feed on stdout, the
    session recorded (its scrapes are the simulator's served text); once per test run (`made_once`)."""
    folder = made_once(tmp_path_factory, "bench-feed", _bench)
    lines = [json.loads(line) for line in (folder / "stdout").read_text().splitlines()]  # the feed alone
    with gzip.open(folder / "run.tokentop-session.gz", "rt") as f:
        scrapes = [e for e in map(json.loads, f) if e.get("k") == "scrape"]
    results = json.loads((folder / "results.json").read_text())
    return {"stderr": (folder / "stderr").read_text(), "lines": lines, "results": results, "scrapes": scrapes}


def _bench(folder: Path) -> None:
    r = bench(
        "--sim-profile", "small-gpu", "--sim-time-scale", "10", "--concurrency", "1,2", "--duration", "3",
        "--isl", "32", "--osl", "32", "--no-isl-probe", "--cost-per-hour", str(COST), "--slo-e2e-ms", "5000",
        "--live-jsonl", "-", "--output", str(folder / "results.json"),
        "--record", str(folder / "run.tokentop-session.gz"), timeout_s=90.0,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    (folder / "stdout").write_text(r.stdout)
    (folder / "stderr").write_text(r.stderr)


def test_the_feeds_last_line_is_the_saved_results_after_a_tick_a_second_and_a_line_per_level(
    run: dict[str, Any],
) -> None:
    lines, saved = run["lines"], run["results"]
    assert lines[-1] == {"event": "results", "results": saved}
    events = [line["event"] for line in lines]
    said = [line["level"]["level_id"] for line in lines if line["event"] == "level"]
    assert said == [lv["level_id"] for lv in saved["levels"]] == [1, 2]
    assert lines[-2]["level"] == saved["levels"][-1]  # the last level, from the document saved
    first = next(line["level"] for line in lines if line["event"] == "level")
    for key in ("completed", "total_output_tokens", "output_throughput", "usd_per_mtok_output"):
        assert first[key] == saved["levels"][0][key], key  # an ended level's line: its figures as saved
    # a tick about every second of each 3 s level, under the results' own keys
    ticks = [line for line in lines if line["event"] == "tick"]
    assert 3 <= len(ticks) <= 9, events
    keys = {k for lv in saved["levels"] for k in lv}
    for tick in ticks:
        assert set(tick["level"]) <= keys and tick["level"]["level_id"] in (1, 2)
        assert tick["run_s"] > 0 and tick["in_flight"] >= 0
    assert events.index("level") > events.index("tick")  # the first level ticked before it ended
    assert "$/Mtok out" in run["stderr"] and "$/Mtok at SLO:" in run["stderr"]  # the table, on stderr


def test_each_levels_price_is_exactly_the_hourly_cost_over_its_saved_rate(run: dict[str, Any]) -> None:
    saved = run["results"]
    assert saved["config"]["cost_per_hour"] == COST
    for lv in saved["levels"]:
        assert lv["usd_per_mtok_output"] == COST / 3600 / lv["output_throughput"] * 1e6
        assert lv["usd_per_mtok_input"] == COST / 3600 / (lv["total_input_tokens"] / lv["duration"]) * 1e6
        assert lv["slo"]["usd_per_mtok_goodput"] == COST / 3600 / lv["slo"]["output_goodput"] * 1e6
    # every request met a 5 s E2E: the capacity at SLO is the highest load, priced by its met tokens
    top = saved["levels"][-1]
    assert saved["cost_at_slo"] == {
        "level_id": top["level_id"], "value": 2.0, "usd_per_mtok_goodput": top["slo"]["usd_per_mtok_goodput"]
    }  # fmt: skip


def test_joules_per_token_is_the_simulators_energy_delta_over_the_levels_tokens(run: dict[str, Any]) -> None:
    """The simulator's energy counter as it served it (the recorded scrapes' text), between the first and
    last scrape inside each level's window, over the seconds between them, over the level's tokens/s."""
    saved = run["results"]
    t0 = saved["clock"]["perf_t0_ns"]
    served = []
    for scrape in run["scrapes"]:
        mj = [
            float(ln.rpartition(" ")[2]) for ln in scrape["text"].splitlines() if ln.startswith(ENERGY + "{")
        ]
        assert len(mj) == 1  # small-gpu: one GPU
        served.append((scrape["at"], mj[0]))
    measured = 0
    for lv in saved["levels"]:
        gpu = lv["server"]["gpu"]
        t_from, t_to = t0 + int(lv["window_from_s"] * 1e9), t0 + int(lv["window_to_s"] * 1e9)
        inside = [(t, mj) for t, mj in served if t_from <= t <= t_to]
        if len(inside) < 2:
            assert gpu["energy_j"] is None  # a window with one scrape has no delta
            continue
        measured += 1
        assert gpu["energy_j"] == pytest.approx((inside[-1][1] - inside[0][1]) / 1e3, rel=1e-12)
        assert gpu["energy_s"] == (inside[-1][0] - inside[0][0]) / 1e9
        assert gpu["joules_per_output_token"] == gpu["energy_j"] / gpu["energy_s"] / lv["output_throughput"]
        assert gpu["output_tokens_per_joule"] == lv["output_throughput"] / (gpu["energy_j"] / gpu["energy_s"])
        # the simulated H100 draws between idle and board power, per simulated second (time scale 10)
        assert 70.0 <= gpu["energy_j"] / gpu["energy_s"] / 10 <= 700.0
    assert measured >= 1
    assert "J/tok" in run["stderr"]  # the end table's column (stderr: stdout is the feed's)


class _Factory:
    """Scripted engines (`tests.support.scripted_engine`): bench's own loop in this process, in
    milliseconds, no server."""

    def __call__(self, target: TargetConfig, workload: Any, load: LoadTarget, **kw: Any) -> ScriptedEngine:
        return ScriptedEngine(target, workload, load, **kw)


def _scripted_bench(tmp_path: Path, feed: str) -> int:
    ns = build_parser().parse_args(
        ["bench", "--url", "http://127.0.0.1:9/v1", "--concurrency", "1,2", "--requests", "4",
         "--output", str(tmp_path / "results.json"), "--live-jsonl", feed]
    )  # fmt: skip
    return bench_run.run(bench_config(ns), engine_factory=_Factory(), probe=lambda _: Probed("fake-model"))


def test_a_feed_whose_reader_left_is_one_line_and_the_run_still_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--live-jsonl -`` into a pipe whose reader has gone: one line says so, the table goes to stderr (the
    feed's stdout is not the table's), the results are written, exit 1."""
    monkeypatch.setattr(bench_run, "POLL_S", 0.005)
    read_end, write_end = os.pipe()
    os.close(read_end)
    with open(write_end, "w") as pipe:  # stdout, as bench sees it
        monkeypatch.setattr(sys, "stdout", pipe)
        status = _scripted_bench(tmp_path, "-")
        monkeypatch.undo()
    out, err = capsys.readouterr()
    assert status == 1, err
    said = [ln for ln in err.splitlines() if "--live-jsonl" in ln]
    assert said == ["tokentop: error: --live-jsonl -: cannot write (its reader has gone): the feed stopped, "
                    "the run went on"], err  # fmt: skip
    assert "c=2" in err and out == ""
    assert [lv["concurrency"] for lv in json.loads((tmp_path / "results.json").read_text())["levels"]] == [
        1,
        2,
    ]


def test_a_full_disk_stops_the_feed_in_one_line_and_the_run_still_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench_run, "POLL_S", 0.005)
    assert _scripted_bench(tmp_path, "/dev/full") == 1  # every write: ENOSPC
    out, err = capsys.readouterr()
    said = [ln for ln in err.splitlines() if "--live-jsonl" in ln]
    assert said == ["tokentop: error: --live-jsonl /dev/full: cannot write (disk full): the feed stopped, "
                    "the run went on"], err  # fmt: skip
    assert "c=2" in out  # the table: stdout is not the feed's
    assert len(json.loads((tmp_path / "results.json").read_text())["levels"]) == 2


def test_a_feed_that_cannot_be_opened_is_a_usage_error_before_any_load(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--live-jsonl: cannot write .*nowhere"):
        LiveFeed(str(tmp_path / "nowhere" / "feed.jsonl"))
