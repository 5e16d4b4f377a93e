"""Measure the live app's own cost per frame against the real engine and the built-in simulator.

Run from the repository root: `python -m tests.app.frame_cost [USERS,USERS,...] [WIDTHxHEIGHT] [seconds]`.
For each load it prints, from the app's `frame_stats` (CPU time of the UI thread): work per tick (snapshot
+ pane updates + at most one plot build), work until Textual has drawn the tick, the snapshot's share,
and ticks per second. Not a test (pytest does not collect it): its numbers depend on the machine.
"""

from __future__ import annotations

import asyncio
import sys

from tui.app.app import TokentopApp
from tui.app.settings import AppSettings
from tui.app.themes import load_themes
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.sim.launch import SimServer


async def main(levels: list[int], size: tuple[int, int], hold_s: float) -> None:
    with SimServer("small-gpu") as sim:
        engine = EngineHandle(TargetConfig(base_url=sim.url, demo=True), WorkloadConfig(), LoadTarget())
        engine.start()
        try:
            app = TokentopApp(engine, AppSettings(themes=load_themes(), theme="dark", freeze_gc=True))
            async with app.run_test(size=size) as pilot:
                for users in levels:
                    app.set_target(LoadTarget(concurrency=users))
                    await pilot.pause(2.0)  # let the level start
                    app.frame_stats.clear()
                    await pilot.pause(hold_s)
                    fs = app.frame_stats
                    snap = app._snap
                    tps = snap.output_tps if snap is not None else float("nan")
                    print(
                        f"{users:4d} users {size[0]}x{size[1]}: tick p50 {fs.percentile_ms(50):.1f} "
                        f"p99 {fs.percentile_ms(99):.1f} ms | tick+draw p50 {fs.frame_percentile_ms(50):.1f} "
                        f"p99 {fs.frame_percentile_ms(99):.1f} ms | snapshot p50 "
                        f"{fs.snapshot_percentile_ms(50):.1f}"
                        f" ms | {fs.fps:.1f} fps | {tps:,.0f} tok/s",
                        flush=True,
                    )
        finally:
            engine.stop()


if __name__ == "__main__":
    users = [int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "4,16,64,256").split(",")]
    width, height = (int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "160x50").split("x"))
    asyncio.run(main(users, (width, height), float(sys.argv[3]) if len(sys.argv) > 3 else 8.0))
