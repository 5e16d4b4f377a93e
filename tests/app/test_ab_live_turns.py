"""The live app with ``--ab-mode alternate``: two simulators of different speed take the steered load in
turns, A B B A, and the level table judges B against A from the turns. One short run: 2 users, `]` once
B's first turn has a window, then 4 users; turns of 1.5 s."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

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

pytestmark = pytest.mark.timeout(150)
A_SCALE, B_SCALE = 4.0, 2.0
"""The flat profile's token gap is 20 ms / time scale: A 5 ms, B 10 ms (B twice as slow)."""


async def _until(pred: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        await asyncio.sleep(0.05)


def _verdicts(pair: AbPair, metric: str = "TPOT p50 ms") -> dict[float, str | None]:
    """Each load's verdict on ``metric`` as the pair last judged it, by users."""
    return {lv.value: lv.verdict(metric) for lv in pair.ab_view().levels}


def _spans(snap: Snapshot, t0_ns: int) -> list[tuple[float, float]]:
    """Each level that sent a request, as its (start, end) on the shared clock (s)."""
    now = snap.elapsed_s
    return [(t0_ns / 1e9 + lv.started_s, t0_ns / 1e9 + (now if lv.ended_s is None else lv.ended_s))
            for lv in snap.levels if lv.completed + lv.failed]  # fmt: skip


async def test_b_slower_is_worse_at_each_load_held_in_turns() -> None:
    with SimServer("flat", time_scale=A_SCALE) as a, SimServer("flat", time_scale=B_SCALE) as b:
        ns = build_parser().parse_args(["live", "--url", a.url, "--ab", b.url, "--ab-mode", "alternate",
                                        "--ab-block", "1.5", "--concurrency", "2", "--isl", "16", "--osl",
                                        "24", "--no-isl-probe", "--no-record"])  # fmt: skip
        config = live_config(ns)
        pair = make_engine(config, config.server.target)
        assert isinstance(pair, AbPair) and pair.turns is not None
        settings = AppSettings(themes=load_themes(), theme="dark", tick_s=3600.0, plot_thread=False)
        app = TokentopApp(pair, settings)
        pair.start()
        try:
            assert pair.wait_ready(30.0), pair.fatal
            async with app.run_test(size=(220, 60)) as pilot:
                await _until(lambda: pair.turns is not None and pair.turns.on == "B", 20, "B's turn")
                app.poll(force=True)
                await settle(pilot)
                on_b = screen_text(app)
                assert not app.check_action(
                    "toggle_ramp", ()
                )  # the ramp reads A's levels, paused for B's turns
                # judged from the first turns that hold enough blocks; on a loaded machine one stalled block
                # can leave that first verdict within noise, and the next turns at the load narrow it
                await _until(lambda: _verdicts(pair).get(2.0) == "worse", 30, "2 users judged worse")
                await pilot.press(
                    "right_square_bracket"
                )  # 2 -> 4 users: the side on turn now, the other next
                await _until(lambda: _verdicts(pair).get(4.0) == "worse", 40, "4 users judged worse")
                app.poll(force=True)
                await settle(pilot)
                screen = screen_text(app)
                a_snap, b_snap = pair.a.snapshot(), pair.b.snapshot()
        finally:
            pair.stop()

    # each request's TPOT (5 ms a token on A, 10 on B), always; tok/s is a few requests a 0.25 s block, and
    # at load 11 a stalled client's blocks put one turn's tok/s interval across -10 % (-60 to -1 %)
    assert _verdicts(pair) == {2.0: "worse", 4.0: "worse"}, pair.ab_view().levels
    for level in pair.ab_view().levels:
        tok = next(d for d in level.differences if d.metric == "output tok/s")
        assert tok.verdict in ("worse", "within noise") and (tok.change_pct or 0) < -20, level
        assert "better" not in {d.verdict for d in level.differences}, level
    # the turns: never both sides loaded at once, and each side's load the key's
    a_spans, b_spans = _spans(a_snap, pair.a.t0_ns), _spans(b_snap, pair.b.t0_ns)
    assert not [(x, y) for x in a_spans for y in b_spans if x[0] < y[1] and y[0] < x[1]], (a_spans, b_spans)
    assert {lv.value for lv in b_snap.levels if lv.completed} == {2, 4}
    # on screen: the side on turn, both endpoints, and each of A's turns judged at its load
    assert "▶ running on B" in on_b and f"A {a.url}" in on_b and f"B {b.url}" in on_b
    rows = [line for line in screen.splitlines() if " users " in line and "levels" not in line]
    assert any(" 4 users " in row and "% worse" in row for row in rows), rows
    assert any(" 2 users " in row and "% worse" in row for row in rows), rows
