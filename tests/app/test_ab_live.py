"""The live app with ``--ab``: two simulators of different speed under one steered load, judged level by
level on screen and in the results `s` saves. One run serves every assertion: the app as `tokentop --ab`
makes it (its flags read, its engine made by `tui.app.run.make_engine`), two short levels, `]` between."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.app.conftest import screen_text, settle
from tui.app.app import TokentopApp
from tui.app.run import make_engine
from tui.app.settings import AppSettings
from tui.app.themes import load_themes
from tui.cli import build_parser
from tui.cli.live import live_config
from tui.engine.ab.pair import AbPair
from tui.engine.snapshot import Snapshot
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)
A_SCALE, B_SCALE = 4.0, 2.0
"""The flat profile's token gap is 20 ms / time scale: A 5 ms, B 10 ms (B twice as slow)."""
WINDOW_S = 1.5
"""Each level's steady window on both sides before it is judged: 6 blocks of 0.25 s."""


async def _until(pred: Callable[[], object], timeout_s: float, what: str) -> None:
    """Wait (the app's loop free) until ``pred`` holds; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        await asyncio.sleep(0.1)


def _window_s(snap: Snapshot, users: int) -> float:
    level = next((lv for lv in snap.levels if lv.value == users and lv.steady), None)
    if level is None or level.window_from_s is None or level.window_to_s is None:
        return 0.0
    return level.window_to_s - level.window_from_s


def _judged(pair: AbPair) -> list[str | None]:
    """Each level's tok/s verdict as the pair last judged it."""
    return [lv.verdict("output tok/s") for lv in pair.ab_view().levels]


async def test_b_slower_is_worse_at_each_level_on_screen_and_in_the_saved_results(tmp_path: Path) -> None:
    with SimServer("flat", time_scale=A_SCALE) as a, SimServer("flat", time_scale=B_SCALE) as b:
        ns = build_parser().parse_args(["live", "--url", a.url, "--ab", b.url, "--concurrency", "2", "--isl",
                                        "16", "--osl", "24", "--no-isl-probe", "--no-record",
                                        "--slo-tpot-ms", "9"])  # fmt: skip
        config = live_config(ns)
        pair = make_engine(config, config.server.target)
        assert isinstance(pair, AbPair)
        settings = AppSettings(themes=load_themes(), theme="dark", save_dir=tmp_path, tick_s=3600.0,
                               plot_thread=False)  # fmt: skip
        app = TokentopApp(pair, settings)
        pair.start()
        try:
            assert pair.wait_ready(30.0), pair.fatal
            async with app.run_test(size=(220, 60)) as pilot:
                sides = (pair.a, pair.b)
                await _until(
                    lambda: all(_window_s(e.snapshot(), 2) >= WINDOW_S for e in sides), 40, "2 users"
                )
                await pilot.press("right_square_bracket")  # 2 -> 4 users, on both sides
                await _until(
                    lambda: all(_window_s(e.snapshot(), 4) >= WINDOW_S for e in sides), 40, "4 users"
                )
                await _until(
                    lambda: len(_judged(pair)) == 2 and "unjudged" not in _judged(pair), 20, "2 judged"
                )
                app.poll(force=True)
                await settle(pilot)
                screen = screen_text(app)
                await pilot.press("e")
                await settle(pilot)
                server_b = app._server.border_title
                await pilot.press("s")
                await settle(pilot)
        finally:
            pair.stop()
    assert [lv.value for lv in pair.b.snapshot().levels] == [2, 4]  # the key moved B's load too
    rows = {
        users: next(
            line for line in screen.splitlines() if f" {users} users " in line and "levels" not in line
        )
        for users in (2, 4)
    }
    for users, row in rows.items():
        # B's TPOT column: its figure, its change from A's (about +100 %) and the verdict (tok/s may read
        # within noise on a loaded machine: see tests/integration/bench/test_bench_ab.py)
        assert re.search(r"\d \+[1-9]\d{1,2}% worse", row), (users, row)
    assert "B tok/s vs A" in screen and "A tok/s (left)" in screen and "∘ B" in screen
    assert re.search(r"^.*\bA #\d", screen, re.M) and re.search(r"^.*\bB #\d", screen, re.M)  # lanes marked
    assert "server A" in screen and str(server_b).startswith("server B")
    # a TPOT objective of 9 ms: A's 5 ms gaps meet it, B's 10 ms miss it: B's goodput is none
    assert "B goodput vs A" in screen, screen  # a column, or named among those left out for width
    assert "B serves no load at the SLO, A " in screen, screen
    assert f"A {a.url}" in screen and f"B {b.url}" in screen  # the status bar names both endpoints
    (saved,) = tmp_path.glob("tokentop-*[0-9].json")
    b_csv = saved.with_name(saved.stem + "-b.csv").read_text().splitlines()  # B's exports beside A's
    assert len(b_csv) == 3 and saved.with_name(saved.stem + "-b-plot.svg").is_file()
    doc = json.loads(saved.read_text())
    ab = doc["ab"]
    assert ab["mode"] == "parallel" and ab["threshold_pct"] == 10.0
    assert ab["capacity"]["b"] is None
    assert (ab["capacity"]["a"] or {}).get("value") == doc["capacity_at_slo"].get("value")
    assert ab["b"]["target"]["url"] != doc["target"]["url"]
    assert [(lv["mode"], lv["value"]) for lv in ab["levels"]] == [("concurrency", 2.0), ("concurrency", 4.0)]
    for lv in ab["levels"]:
        verdicts = {d["metric"]: d["verdict"] for d in lv["differences"]}
        assert verdicts["TPOT p50 ms"] == verdicts["output goodput"] == "worse", lv
        assert verdicts["output tok/s"] in ("worse", "within noise"), lv
        assert "better" not in verdicts.values(), lv
