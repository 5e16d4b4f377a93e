"""The live speed knob: the real app under Pilot and the real engine replaying a trace against the
simulator. `]` and `+` change the speed during the replay; each speed is a level of its own, and the
requests of each arrive at the trace's rate times that speed."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import numpy as np
import pytest

from tests.app.conftest import screen_text, settle
from tests.support.engine_helpers import read_jsonl, running_handle
from tui.app.app import TokentopApp
from tui.app.settings import AppSettings
from tui.app.themes import load_themes
from tui.engine.config import LoadTarget, TraceConfig, WorkloadConfig
from tui.engine.traces import check_trace
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(120)
GAP_MS = 100.0
"""The trace's requests are this far apart: 10 req/s at x1."""
PER_LEVEL = 12
"""Requests sent at a speed before the next key."""


async def hold_until_sent(app: TokentopApp, pilot: object, level_id: int, n: int, timeout_s: float) -> None:
    """Tick the app until level ``level_id`` has ``n`` finished requests (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app.poll()
        snap = app._snap
        lv = next((lv for lv in snap.levels if lv.level_id == level_id), None) if snap else None
        if lv is not None and lv.completed + lv.failed >= n:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"level {level_id} did not reach {n} requests in {timeout_s} s")


async def test_two_speed_changes_make_three_levels_at_the_expected_rates(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(
        json.dumps({"timestamp": i * GAP_MS, "input_length": 24, "output_length": 4, "hash_ids": [i]}) + "\n"
        for i in range(40)
    ))  # fmt: skip
    trace = check_trace(TraceConfig(path=str(path), loop=True))
    with (
        SimServer("flat", time_scale=10.0) as sim,
        running_handle(sim.url, LoadTarget(mode="trace"), tmp_path, workload=WorkloadConfig(trace=trace),
                       workers=2) as handle,
    ):  # fmt: skip
        settings = AppSettings(themes=load_themes(), theme="dark", save_dir=tmp_path, tick_s=3600.0,
                               plot_thread=False)  # fmt: skip
        app = TokentopApp(handle, settings)
        async with app.run_test(size=(160, 48)) as pilot:
            await hold_until_sent(app, pilot, 1, PER_LEVEL, 40)
            await pilot.press("right_square_bracket")  # x1 -> x2
            await hold_until_sent(app, pilot, 2, 2 * PER_LEVEL, 40)
            await pilot.press("plus")  # x2 -> x2.5
            await hold_until_sent(app, pilot, 3, 2 * PER_LEVEL, 40)
            app.poll(force=True)
            await settle(pilot)
            text = screen_text(app)
            snap = app._snap
    assert snap is not None
    assert [(lv.mode, lv.value) for lv in snap.levels] == [("trace", 1.0), ("trace", 2.0), ("trace", 2.5)]
    assert "speed-up" in text and "x2.5" in text
    records = read_jsonl(tmp_path / "requests.jsonl")
    for level, speed in ((1, 1.0), (2, 2.0), (3, 2.5)):
        sched = np.sort([r["scheduled_ns"] for r in records if r["level"] == level])
        sent = np.sort([r["sent_ns"] for r in records if r["level"] == level])
        assert len(sched) >= PER_LEVEL
        # every gap of this level is the trace's over its speed (a speed change falls between two sends)
        gaps_ms = np.diff(sched) / 1e6
        assert np.abs(gaps_ms - GAP_MS / speed).max() < 0.01, (level, gaps_ms)
        rate = (len(sent) - 1) / ((sent[-1] - sent[0]) / 1e9)
        assert rate == pytest.approx(1e3 / GAP_MS * speed, rel=0.05), (level, rate)
