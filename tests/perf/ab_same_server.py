"""How often `bench --ab` in parallel calls one simulator against itself different: RUNS runs with the same
simulator as A and B, each judged level by level as bench judges it; prints the figures judged better or
worse per run and the count of runs with every figure within noise (or unjudged). The issue asks for 9 of
10. `python -m tests.perf.ab_same_server [RUNS] [USERS] [DURATION_S]`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tui.sim.launch import SimServer

TIME_SCALE = 4.0
"""The flat profile at 4x, as the A/B integration tests run it (5 ms a token)."""


def run_once(url: str, out: Path, users: str, duration: str) -> list[str]:
    """One parallel A/B of ``url`` against itself; the figures it judged better or worse, each with its
    change and interval."""
    env = dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL="", TOKENTOP_AB_API_KEY="")
    cmd = [sys.executable, "-m", "tui", "bench", "--url", url, "--ab", url, "--concurrency", users,
           "--duration", duration, "--isl", "16", "--osl", "24", "--no-isl-probe", "--no-record", "--quiet",
           "-o", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, timeout=300)
    doc = json.loads(out.read_text())
    return [
        f"{lv['value']:g}u {d['metric']} {d['change_pct']:+.1f}% {d['verdict']}"
        for lv in doc["ab"]["levels"]
        for d in lv["differences"]
        if d["verdict"] in ("better", "worse")
    ]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    users = sys.argv[2] if len(sys.argv) > 2 else "2,4"
    duration = sys.argv[3] if len(sys.argv) > 3 else "2.5"
    clean = 0
    with tempfile.TemporaryDirectory() as tmp, SimServer("flat", time_scale=TIME_SCALE) as sim:
        for i in range(runs):
            judged = run_once(sim.url, Path(tmp) / f"{i}.json", users, duration)
            clean += not judged
            print(f"run {i + 1}: {len(judged)} better/worse {judged}", flush=True)
    print(f"{clean} of {runs} runs with every figure within noise ({users} users, {duration} s a level)")


if __name__ == "__main__":
    main()
