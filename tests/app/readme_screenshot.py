"""Make the README screenshot: the real engine against the built-in simulator, ramped 1, 2, 4, ... users.

Run from the repository root: `python -m tests.app.readme_screenshot [WIDTHxHEIGHT] [seconds per level]`.
Writes tests/app/snapshots/readme-screenshot.svg. Not a test (pytest does not collect it): it takes about a
minute and its picture depends on timing.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tui.app.app import TokentopApp
from tui.app.settings import AppSettings
from tui.app.themes import load_themes
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.sim.launch import SimServer

OUT = Path(__file__).parent / "snapshots" / "readme-screenshot.svg"


async def main(size: tuple[int, int], hold_s: float) -> None:
    with SimServer("small-gpu") as sim:
        engine = EngineHandle(TargetConfig(base_url=sim.url, demo=True), WorkloadConfig(), LoadTarget())
        engine.start()
        try:
            app = TokentopApp(engine, AppSettings(themes=load_themes(), theme="dark", freeze_gc=True))
            async with app.run_test(size=size) as pilot:
                for users in (1, 2, 4, 8, 16, 32):
                    app.set_target(LoadTarget(concurrency=users))
                    await pilot.pause(hold_s)
                app.poll(force=True)
                await pilot.pause(0.5)
                app.save_screenshot(filename=OUT.name, path=str(OUT.parent))
                print(f"wrote {OUT}  ({app.frame_stats.summary()})")
        finally:
            engine.stop()


if __name__ == "__main__":
    width, height = (int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "160x50").split("x"))
    asyncio.run(main((width, height), float(sys.argv[2]) if len(sys.argv) > 2 else 8.0))
