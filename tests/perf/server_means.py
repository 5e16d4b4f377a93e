"""What the level table's server means cost the UI thread once per scrape, with the poller's ring full.

    python tests/perf/server_means.py [--readings 3600] [--levels 12] [--scrapes 30]

The ring holds readings of the simulator's recorded /metrics a second apart (an hour at the default 1 Hz),
with the running areas the poller adds (`with_areas`). Two runs: one level spanning the whole hour (the
soak), and ``--levels`` levels splitting it, all but the last settled. Each is timed three ways per scrape:
every level point by point over the whole ring (readings without areas), every level
from the areas by bisection, and that with the settled levels kept (`ServerMeans`, what the app does).
Prints the median and max per scrape in ms, and the ratio to the point-by-point figure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support import frozen  # noqa: E402
from tui.app.widgets.level_table import ServerMeans, server_means  # noqa: E402
from tui.engine.server_metrics.kinds import VLLM  # noqa: E402
from tui.engine.server_metrics.parse import parse_text  # noqa: E402
from tui.engine.server_metrics.view import Hold, Reading, ServerView, build_view, read, with_areas  # noqa: E402
from tui.engine.snapshot import LevelView  # noqa: E402

S = 1_000_000_000
FIXTURE = ROOT / "tests" / "unit" / "fixtures" / "server_metrics" / "vllm_sim.txt"


def ring(n: int) -> tuple[Reading, ...]:
    """``n`` readings a second apart, as the poller stores them."""
    first = read(parse_text(FIXTURE.read_text()), 0, VLLM)
    holds: dict[str, Hold] = {}
    out = []
    for i in range(n):
        gauges = {**first.gauges, "waiting": float(i % 7)}
        out.append(with_areas(Reading(i * S, gauges, first.counters, first.histograms), holds))
    return tuple(out)


def levels(count: int, span_s: float) -> tuple[LevelView, ...]:
    """``count`` levels splitting ``span_s`` evenly; all settled but the last, which runs."""
    base = frozen.LEVELS[0]
    each = span_s / count
    out = []
    for i in range(count):
        last = i == count - 1
        out.append(
            replace(
                base, level_id=i + 1, started_s=i * each, ended_s=None if last else (i + 1) * each,
                window_from_s=i * each + 1.0, window_to_s=None if last else (i + 1) * each, settled=not last,
            )
        )  # fmt: skip
    return tuple(out)


def timed(fn: object, scrapes: int) -> list[float]:
    out = []
    for _ in range(scrapes):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter() - t) * 1e3)
    return out


def run(readings: int, level_count: int, scrapes: int) -> None:
    with_areas_ = ring(readings)
    view = build_view(ServerView(kind=VLLM), with_areas_, "m")
    by_points = replace(view, readings=tuple(replace(r, areas={}) for r in with_areas_))
    lv = levels(level_count, readings - 1.0)
    t0, now = 0, (readings - 1) * S
    kept_means = ServerMeans()
    scraped = [view.scrapes]

    def kept() -> None:
        # a new scrape each time (the app recomputes once a scrape): a new view of the same ring
        scraped[0] += 1
        kept_means.of(replace(view, scrapes=scraped[0]), lv, t0, now)

    results = {
        "point by point": timed(lambda: server_means(by_points, lv, t0, now), scrapes),
        "running areas, by bisection": timed(lambda: server_means(view, lv, t0, now), scrapes),
        "and settled levels kept (app)": timed(kept, scrapes),
    }
    base = statistics.median(results["point by point"])
    print(f"{level_count} level(s) over {readings} readings, {scrapes} scrapes:")
    for name, ms in results.items():
        med = statistics.median(ms)
        print(f"  {name:30s} median {med:7.3f} ms  max {max(ms):7.3f} ms  ({med / base:.3f} of before)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readings", type=int, default=3600)
    ap.add_argument("--levels", type=int, default=12)
    ap.add_argument("--scrapes", type=int, default=30)
    args = ap.parse_args()
    run(args.readings, 1, args.scrapes)
    run(args.readings, args.levels, args.scrapes)


if __name__ == "__main__":
    main()
