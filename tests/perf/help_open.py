"""How long `?` and `escape` take to act in the app, with the tests' fake engine (no load, no server).

    python tests/perf/help_open.py [--times 10]

Each key is posted as a terminal's key (`App.simulate_key`) and timed until the app has painted a frame of
the screen it leads to (the help, or the main screen again; see `PaintClock`); 0.3 s between presses.
Prints the first opening, then medians: the first builds the help screen, later ones show it again.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.perf.paint_clock import PaintClock  # noqa: E402
from tests.support.fake_engine import FakeEngine  # noqa: E402
from tui.app.app import TokentopApp  # noqa: E402
from tui.app.settings import AppSettings  # noqa: E402
from tui.app.themes import load_themes  # noqa: E402

DEADLINE_S = 10.0


async def measure(times: int, tmp: Path) -> tuple[list[float], list[float]]:
    engine: Any = FakeEngine()  # the app tests' stand-in, typed loosely as there (tests/app/conftest.py)
    app = TokentopApp(engine, AppSettings(themes=load_themes(), theme="dark", save_dir=tmp, tick_s=0.1))
    opens: list[float] = []
    closes: list[float] = []
    async with app.run_test(size=(140, 45)):
        clock = PaintClock(app)
        await asyncio.sleep(1.0)
        for _ in range(times):
            opens.append(await clock.key_to_paint("question_mark", help_up=True, deadline_s=DEADLINE_S))
            closes.append(await clock.key_to_paint("escape", help_up=False, deadline_s=DEADLINE_S))
            await asyncio.sleep(0.3)
    return opens, closes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--times", type=int, default=10)
    ns = ap.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        opens, closes = asyncio.run(measure(max(2, ns.times), Path(tmp)))
    print(
        f"? first {opens[0] * 1000:.0f} ms, then p50 {statistics.median(opens[1:]) * 1000:.0f} ms "
        f"(max {max(opens[1:]) * 1000:.0f}); escape p50 {statistics.median(closes) * 1000:.0f} ms "
        f"over {len(opens)} presses"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
