"""How big a session grows: record S seconds at N users against the simulator and print the file's size,
its uncompressed size, and both per hour (extrapolated linearly: a session's events come at a steady rate
once the load is steady). Usage: python tests/perf/session_size.py [--users 100] [--seconds 60]
[--record-text]. Not part of the test run."""

from __future__ import annotations

import argparse
import tempfile
import time
import zlib
from pathlib import Path

from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.recording.file import read_session
from tui.sim.launch import SimServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--profile", default="small-gpu")
    ap.add_argument("--record-text", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, SimServer(args.profile) as sim:
        path = Path(tmp) / "size.tokentop-session.gz"
        options = EngineOptions(record=str(path), record_text=args.record_text)
        load = LoadTarget(concurrency=args.users)
        handle = EngineHandle(TargetConfig(base_url=sim.url), WorkloadConfig(), load, options=options)
        handle.start()
        handle.wait_ready(60.0)
        started = time.monotonic()
        time.sleep(args.seconds)
        handle.stop()
        elapsed = time.monotonic() - started
        snap = handle.snapshot()
        size = path.stat().st_size
        raw = len(zlib.decompress(path.read_bytes(), 31))
        session = read_session(path)
        kinds: dict[str, int] = {}
        for e in session.events:
            kinds[e["k"]] = kinds.get(e["k"], 0) + 1
        per_hour = 3600 / elapsed
        print(f"users {args.users}, {elapsed:.0f} s, profile {args.profile}, text {args.record_text}")
        print(f"requests {snap.completed}, output tokens/s {snap.output_tps:.0f}, events {kinds}")
        print(f"file {size / 1e6:.2f} MB (uncompressed {raw / 1e6:.2f} MB, ratio {raw / size:.1f}x)")
        print(f"per hour: {size * per_hour / 1e6:.0f} MB on disk, {raw * per_hour / 1e6:.0f} MB uncompressed")


if __name__ == "__main__":
    main()
