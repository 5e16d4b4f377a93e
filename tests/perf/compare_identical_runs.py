"""How often compare calls two identical runs different: PAIRS pairs of the same bench command against the
same simulator, each compared; prints the figures judged better or worse per pair and the count of pairs
with none. `python -m tests.perf.compare_identical_runs [PAIRS] [THRESHOLD_PCT] [TIME_SCALE] [KEEP_DIR]`
(sessions already in KEEP_DIR are compared again, not recorded again)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tui.engine.sessions.compare import comparison
from tui.sim.launch import SimServer

RUN = ("--concurrency", "2,4", "--duration", "4", "--isl", "16", "--osl", "32", "--workers", "1", "--quiet")


def record(url: str, path: Path) -> None:
    env = dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL="")
    cmd = [sys.executable, "-m", "tui", "bench", "--url", url, "--record", str(path), *RUN]
    subprocess.run(
        cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120
    )


def main() -> None:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    threshold = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    scale = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    clean = 0
    keep = sys.argv[4] if len(sys.argv) > 4 else None
    with tempfile.TemporaryDirectory() as tmp, SimServer("small-gpu", time_scale=scale) as sim:
        folder = Path(keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(pairs):
            a, b = folder / f"{i}a.gz", folder / f"{i}b.gz"
            for path in (a, b):
                if not path.exists():
                    record(sim.url, path)
            data = comparison([a, b], threshold)
            judged = [
                f"{lv['load'][1]:g}u {d.metric} {d.percent:+.1f}% [{d.interval[0]:+.1f},{d.interval[1]:+.1f}]"
                for lv in data["pairs"][0]["levels"]
                for d in lv["differences"]
                if d.verdict in ("better", "worse")
            ]
            widest = max(
                (abs(d.percent) for lv in data["pairs"][0]["levels"] for d in lv["differences"]
                 if d.percent is not None and not d.metric.startswith("server")),
                default=0.0,
            )  # fmt: skip
            clean += not judged
            print(
                f"pair {i + 1}: {len(judged)} better/worse (largest change {widest:.1f} %) {judged}",
                flush=True,
            )
    print(f"{clean} of {pairs} pairs with no figure better or worse (threshold {threshold:g} %)")


if __name__ == "__main__":
    main()
