"""Soak: the live app for a long run against the simulator with its faults on. Does anything grow?

    python tests/perf/soak.py [--minutes 60] [--users 24] [--sample-s 30] [--warmup-min 10] [--out FILE]

The real app (`TokentopApp`, headless under Textual's test driver, 140x45, its own timer) drives a real
`EngineHandle` (2 worker processes) against `python -m tui.sim` with every fault kind injected: 1% HTTP 500,
1% 429, 1% mid-stream disconnects, 1% malformed lines and 0.5% stalls (the per-request silence limit is 20 s
here, so a stalled stream ends as a `stall` in bounded time). The load stays at one level the whole run, so
the bounded aggregates fill once and then must stay flat.

Every ``--sample-s`` it records, for the face (this process) and for each worker process: resident memory
(VmRSS), open file descriptors and threads; the asyncio tasks of the app's loop and of the workers
(`snapshot.health.worker_tasks`); and the app's responsiveness: how long a key takes to act (``?`` opens
help, ``escape`` closes it, posted as a terminal's keys: the time until the app has painted the result),
its frame rate and work per tick.
At the end it compares the warm-up's end with the run's end and prints one line per figure. Samples go to
``--out`` as JSON lines. Not a pytest test (tests/perf is excluded); 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.perf.paint_clock import PaintClock  # noqa: E402
from tui.app.app import TokentopApp  # noqa: E402
from tui.app.settings import AppSettings  # noqa: E402
from tui.app.themes import load_themes  # noqa: E402
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig  # noqa: E402
from tui.engine.host.handle import EngineHandle  # noqa: E402
from tui.sim.launch import SimServer  # noqa: E402

FAULTS = {"error500": 0.01, "error429": 0.01, "disconnect": 0.01, "malformed": 0.01, "stall": 0.005}
KEY_DEADLINE_S = 10.0
"""A key that has not acted within this long is recorded as this long (and counted as a miss)."""


def proc_stats(pid: int) -> dict[str, int]:
    """Resident memory (kB), open file descriptors and threads of one process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        "rss_kb": int(fields["VmRSS"].split()[0]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "threads": int(fields["Threads"]),
    }


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (the engine workers and the simulator of this process)."""
    kids: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        text = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        kids.extend(int(k) for k in text)
    return kids


async def key_latency_s(clock: PaintClock) -> float:
    """Post ``?`` as a key press and time it until the app has painted the help, then ``escape`` until it
    has painted the main screen again; the slower of the two (seconds, capped at `KEY_DEADLINE_S`). Posted
    like a terminal's key, not through `Pilot.press`, which also waits for the app to be idle (up to 1 s,
    twice, in an app whose 10 Hz timer never lets it idle) and so timed the pilot, not the app."""
    up = await clock.key_to_paint("question_mark", help_up=True, deadline_s=KEY_DEADLINE_S)
    down = await clock.key_to_paint("escape", help_up=False, deadline_s=KEY_DEADLINE_S)
    return max(up, down)


async def loop_lag_s() -> float:
    """How late a 50 ms sleep on the app's loop wakes up."""
    t0 = time.perf_counter()
    await asyncio.sleep(0.05)
    return time.perf_counter() - t0 - 0.05


async def soak(ns: argparse.Namespace, url: str, sim_pid: int, workdir: Path) -> list[dict[str, Any]]:
    engine = EngineHandle(
        TargetConfig(base_url=url, timeout_s=20.0),
        WorkloadConfig(isl=128, osl=128),
        LoadTarget(concurrency=ns.users),
        workers=2,
        requests_log=workdir / "requests.jsonl",
        options=EngineOptions(metrics_interval_s=ns.scrape_s),
    )
    engine.start()
    samples: list[dict[str, Any]] = []
    try:
        app = TokentopApp(
            engine, AppSettings(themes=load_themes(), theme="dark", save_dir=workdir, freeze_gc=True)
        )
        async with app.run_test(size=(140, 45)):
            clock = PaintClock(app)
            t0 = time.monotonic()
            end = t0 + ns.minutes * 60
            next_at = t0
            traces = TraceWindow(ns.trace_from_min, ns.trace_base_min, ns.trace_frames)
            while time.monotonic() < end:
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                next_at += ns.sample_s
                traces.tick((time.monotonic() - t0) / 60)
                samples.append(await sample(app, clock, engine, t0, sim_pid))
                print(json.dumps(samples[-1]), file=ns.out, flush=True)
                print(progress_line(samples[-1]), flush=True)
            traces.report()
    finally:
        engine.stop(finish_in_flight=False, timeout_s=10.0)
    return samples


class TraceWindow:
    """Where the face's memory grows: tracemalloc from ``from_min`` (after warm-up, so start-up allocations
    are not counted), a baseline snapshot at ``base_min`` and one at the end; the report lists the source
    lines whose live allocations grew most between the two. Off unless ``--trace-from-min`` is given."""

    def __init__(self, from_min: float | None, base_min: float | None, frames: int = 6) -> None:
        self.from_min = from_min
        self.frames = frames
        self.base_min = base_min if base_min is not None else (from_min or 0) + 5
        self.base: tracemalloc.Snapshot | None = None

    def tick(self, t_min: float) -> None:
        if self.from_min is None:
            return
        if t_min >= self.from_min and not tracemalloc.is_tracing():
            tracemalloc.start(self.frames)
        if t_min >= self.base_min and self.base is None and tracemalloc.is_tracing():
            self.base = tracemalloc.take_snapshot()

    def report(self, top: int = 25) -> None:
        if self.base is None:
            return
        ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
        end = tracemalloc.take_snapshot().filter_traces(ignore)
        base = self.base.filter_traces(ignore)
        diff = end.compare_to(base, "lineno")
        print(f"\ntracemalloc: live allocations grown since the baseline (top {top} lines)")
        for stat in diff[:top]:
            print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks  {stat.traceback[0]}")
        print(f"  total {sum(s.size_diff for s in diff) / 1024 / 1024:+.2f} MiB")
        for stat in end.compare_to(base, "traceback")[:6]:
            print(f"\n  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks")
            for line in stat.traceback.format()[-16:]:
                print(f"    {line}")


def deep_size(objs: list[Any]) -> int:
    """Bytes held by ``objs`` and everything they reach, each object counted once (strings, types and
    modules left out: they are shared)."""
    seen: set[int] = set()
    total, stack = 0, list(objs)
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, (str, type)):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        stack.extend(gc.get_referents(o))
    return total


def bounded_kb(engine: EngineHandle) -> dict[str, Any]:
    """What the face's bounded buffers hold now (kB): they fill once and then stop, so their growth is
    subtracted from the RSS growth before anything is called a leak. The server-metrics poller's ring of
    readings (an hour at 1 Hz) and each level's reservoirs (rows written so far; numpy's pages become
    resident as they are written). Read through private names: a measurement script, not an API."""
    poller = getattr(getattr(engine, "_scrape", None), "_poller", None)
    ring = list(getattr(poller, "_ring", ()))
    store = getattr(engine, "_store", None)
    levels = list(getattr(store, "levels", {}).values())
    rows = 0
    for lv in levels:
        for res in (lv.req, lv.gaps):
            rows += res.size * sum(col.itemsize for col in res.cols.values())
    lanes = getattr(store, "lanes", None)
    return {"poller_ring": round(deep_size(ring) / 1024, 1), "poller_readings": len(ring),
            "reservoirs": round(rows / 1024, 1),
            "lanes": [len(getattr(lanes, n, ())) for n in ("live", "finished", "recent")]}  # fmt: skip


async def sample(
    app: TokentopApp, clock: PaintClock, engine: EngineHandle, t0: float, sim_pid: int
) -> dict[str, Any]:
    key_s = await key_latency_s(clock)
    lag_s = await loop_lag_s()
    snap = engine.snapshot()
    me = os.getpid()
    workers = [proc_stats(pid) for pid in children(me) if pid != sim_pid]
    fs = app.frame_stats
    return {
        "t_min": round((time.monotonic() - t0) / 60, 2),
        "face": proc_stats(me),
        "app_tasks": len(asyncio.all_tasks()),
        "py_threads": threading.active_count(),
        "workers": len(workers),
        "workers_rss_kb": sum(w["rss_kb"] for w in workers),
        "workers_fds": sum(w["fds"] for w in workers),
        "workers_threads": sum(w["threads"] for w in workers),
        "worker_tasks": snap.health.worker_tasks,
        "sim": proc_stats(sim_pid),
        "bounded_kb": bounded_kb(engine),
        "key_ms": round(key_s * 1000, 1),
        "loop_lag_ms": round(lag_s * 1000, 2),
        "fps": round(fs.fps, 1),
        "work_p99_ms": round(fs.percentile_ms(99), 2),
        "completed": snap.completed,
        "failed": snap.failed,
        "errors": dict(snap.errors),
        "in_flight": snap.in_flight,
    }


def progress_line(s: dict[str, Any]) -> str:
    """One sample, for the console."""
    face, mb = s["face"], 1024
    return (
        f"{s['t_min']:6.1f} min  face {face['rss_kb'] / mb:6.1f} MB {face['fds']:3d} fds "
        f"{s['app_tasks']:3d} tasks | workers {s['workers_rss_kb'] / mb:6.1f} MB {s['workers_fds']:3d} fds "
        f"{s['worker_tasks']:4d} tasks | key {s['key_ms']:6.1f} ms lag {s['loop_lag_ms']:5.1f} ms "
        f"fps {s['fps']:4.1f} | done {s['completed']} failed {s['failed']}"
    )


def report(samples: list[dict[str, Any]], warmup_min: float) -> None:
    """Compare the first samples after warm-up with the last ones: growth per hour of each figure."""
    after = [s for s in samples if s["t_min"] >= warmup_min]
    if len(after) < 4:
        print("too few samples after the warm-up to judge growth")
        return
    k = max(2, len(after) // 6)
    early, late = after[:k], after[-k:]
    span_h = (statistics.mean(s["t_min"] for s in late) - statistics.mean(s["t_min"] for s in early)) / 60
    figures = {
        "face RSS MB": lambda s: s["face"]["rss_kb"] / 1024,
        "  bounded MB": lambda s: (s["bounded_kb"]["poller_ring"] + s["bounded_kb"]["reservoirs"]) / 1024,
        "  the rest MB": lambda s: (
            (s["face"]["rss_kb"] - s["bounded_kb"]["poller_ring"] - s["bounded_kb"]["reservoirs"]) / 1024
        ),
        "face fds": lambda s: s["face"]["fds"],
        "face threads": lambda s: s["face"]["threads"],
        "app loop tasks": lambda s: s["app_tasks"],
        "workers RSS MB": lambda s: s["workers_rss_kb"] / 1024,
        "workers fds": lambda s: s["workers_fds"],
        "workers threads": lambda s: s["workers_threads"],
        "worker tasks": lambda s: s["worker_tasks"],
        "sim RSS MB": lambda s: s["sim"]["rss_kb"] / 1024,
    }
    print(f"\nafter a {warmup_min:g} min warm-up: mean of the first {k} vs the last {k} samples "
          f"({span_h * 60:.0f} min apart)")  # fmt: skip
    for name, get in figures.items():
        a, b = statistics.mean(map(get, early)), statistics.mean(map(get, late))
        print(f"  {name:<16} {a:9.1f} -> {b:9.1f}  ({b - a:+.1f}; max over run {max(map(get, samples)):.1f})")
    keys = sorted(s["key_ms"] for s in samples)
    misses = sum(1 for s in samples if s["key_ms"] >= KEY_DEADLINE_S * 1000)
    print(f"  key to screen    p50 {statistics.median(keys):.1f} ms, max {keys[-1]:.1f} ms over {len(keys)} "
          f"presses ({misses} over {KEY_DEADLINE_S:g} s)")  # fmt: skip
    lags = sorted(s["loop_lag_ms"] for s in samples)
    print(f"  app loop lag     p50 {statistics.median(lags):.1f} ms, max {lags[-1]:.1f} ms; "
          f"fps min {min(s['fps'] for s in after):.1f}")  # fmt: skip
    last = samples[-1]
    print(f"  requests         {last['completed']} completed, {last['failed']} failed: {last['errors']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--users", type=int, default=24)
    ap.add_argument("--sample-s", type=float, default=30.0)
    ap.add_argument("--warmup-min", type=float, default=10.0)
    ap.add_argument(
        "--scrape-s", type=float, default=1.0,
        help="/metrics scrape interval (0.25 fills the poller's 3,600-reading ring in 15 min, not an hour)",
    )  # fmt: skip
    ap.add_argument("--time-scale", type=float, default=1.0, help="the simulator's speed-up")
    ap.add_argument("--trace-from-min", type=float, default=None, help="start tracemalloc at this minute")
    ap.add_argument("--trace-frames", type=int, default=6, help="frames kept per allocation (cost grows)")
    ap.add_argument("--trace-base-min", type=float, default=None, help="its baseline snapshot (default +5)")
    ap.add_argument("--out", type=argparse.FileType("w"), default=None, help="samples as JSON lines")
    ns = ap.parse_args()
    if ns.out is None:
        ns.out = open(os.devnull, "w")  # noqa: SIM115 - lives for the run
    print(f"soak: {ns.minutes:g} min, {ns.users} users, faults {FAULTS}, a sample every {ns.sample_s:g} s")
    with (
        SimServer("small-gpu", faults=FAULTS, time_scale=ns.time_scale) as sim,
        tempfile.TemporaryDirectory() as tmp,
    ):
        sim.start()
        assert sim.url is not None and sim.process is not None
        samples = asyncio.run(soak(ns, sim.url, sim.process.pid, Path(tmp)))
    report(samples, ns.warmup_min)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
