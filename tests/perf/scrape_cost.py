"""Does scraping the server's /metrics cost the engine anything? Client-added ITL error at N paced streams,
with the handle's poller scraping a simulator's /metrics and without, in alternating runs.

    python tests/perf/scrape_cost.py [--streams 200] [--rounds 3] [--seconds 10] [--interval 0.2]

The paced server (`tui.sim.paced`) streams and stamps every chunk; a separate idle simulator serves a real
vLLM-named /metrics for the poller (its parse cost is real; `--interval 0.2` scrapes 5x more often than the
default, to make any cost visible). Prints each run's error p50/p99 and the worker's lag p99, then the
medians per setting and their ratio. Not a pytest test (tests/perf is excluded); 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tui.calibrate.stream_search import LevelResult, measure_level  # noqa: E402
from tui.engine.config import EngineOptions  # noqa: E402
from tui.sim.launch import SimServer  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--token-rate", type=float, default=50.0)
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between scrapes while scraping")
    ns = ap.parse_args()
    results: dict[str, list[LevelResult]] = {"off": [], "on": []}
    with SimServer("small-gpu") as metrics_sim, tempfile.TemporaryDirectory() as tmp:
        metrics_url = metrics_sim.start().url.removesuffix("/v1") + "/metrics"
        settings = {
            "off": EngineOptions(server_metrics=False),
            "on": EngineOptions(metrics_url=metrics_url, metrics_interval_s=ns.interval),
        }
        print(f"{ns.streams} paced streams at {ns.token_rate:g} tok/s; scraping {metrics_url} every "
              f"{ns.interval:g} s when on")  # fmt: skip
        for round_ in range(ns.rounds):
            for name in ("off", "on") if round_ % 2 == 0 else ("on", "off"):
                r = measure_level(
                    ns.streams, token_rate=ns.token_rate, seconds=ns.seconds, workdir=Path(tmp),
                    options=settings[name],
                )  # fmt: skip
                results[name].append(r)
                print(f"  round {round_ + 1} scraping {name:<3}: err p50 {r.errors.p50_ms:+.3f} ms, "
                      f"p99 {r.errors.p99_abs_ms:.2f} ms; worker lag p99 {r.loop_lag_p99_ms:.2f} ms; "
                      f"floor p99 {r.floor_p99_ms:.2f} ms; failed {r.failed}", flush=True)  # fmt: skip
    med = {k: statistics.median(r.errors.p99_abs_ms for r in v) for k, v in results.items()}
    print(f"median ITL error p99: off {med['off']:.2f} ms, on {med['on']:.2f} ms "
          f"(on/off {med['on'] / med['off']:.2f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
