"""A local engine worker killed by the kernel (the OOM killer's SIGKILL, or `kill -9`): one line naming the
worker and the signal, its in-flight requests counted as lost, what was measured kept, and the run goes on
over the workers left or stops as `--on-node-loss` says. Before, any worker death was the run's fatal
error ("exited unexpectedly") and its requests in flight were never accounted for."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.support.engine_helpers import bench_process_argv, logged_lines, read_jsonl, wait_for
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.host.playback_engine import PlaybackEngine
from tui.engine.host.pool import lost_line
from tui.engine.recording.file import read_session
from tui.engine.snapshot import Snapshot
from tui.engine.wire import WorkerLost
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)
LOGGED = 100
"""Requests logged before the kill: a steady window for level 1 (80 ms requests: two seconds of them)."""


def test_the_line_names_the_worker_the_signal_and_what_was_in_flight() -> None:
    lost = WorkerLost("worker 1", 3_500_000_000, (1,), "SIGKILL")
    assert lost_line(lost, 3, 4, 2, 1_000_000_000) == (
        "engine worker 1 (of 4) killed by SIGKILL at 2.5 s (the kernel's OOM killer, or kill -9): "
        "3 in flight lost; level 2 ends there"
    )
    crashed = WorkerLost("worker 0", 3_500_000_000, (0,), "SIGSEGV")  # not the OOM killer's signal
    assert lost_line(crashed, 1, 4, 2, 1_000_000_000) == (
        "engine worker 0 (of 4) killed by SIGSEGV at 2.5 s: 1 in flight lost; level 2 ends there"
    )


def test_a_killed_worker_is_one_line_its_requests_counted_and_the_load_goes_on(tmp_path: Path) -> None:
    with SimServer("flat", time_scale=4.0) as sim:
        target = TargetConfig(base_url=sim.url, model="", timeout_s=10)
        options = EngineOptions(on_worker_loss="continue")
        handle = EngineHandle(target, WorkloadConfig(isl=8, osl=64), LoadTarget(concurrency=4), workers=2,
                              options=options)  # fmt: skip
        handle.start()
        try:

            def worker_1_busy(s: Snapshot) -> bool:  # request ids interleave: worker 1's are even
                return s.completed >= 4 and any(lane.request_id % 2 == 0 for lane in s.lanes)

            _, before, _ = wait_for(handle, worker_1_busy, 30, "worker 1 with requests in flight")
            pid = handle._workers.pool._procs[1].pid  # type: ignore[attr-defined]
            os.kill(pid, signal.SIGKILL)
            # the notice is said at once, the level's views at their next refresh (every 100 ms): both
            _, snap, _ = wait_for(
                handle,
                lambda s: any("killed by" in n for n in s.notices) and s.levels[0].workers_lost == 1,
                10,
                "the line and level 1's lost worker",
            )
            (line,) = [n for n in snap.notices if "killed by" in n]
            said = re.fullmatch(
                r"engine worker 1 \(of 2\) killed by SIGKILL at [\d.]+ s "
                r"\(the kernel's OOM killer, or kill -9\): (\d+) in flight lost; level 1 ends there",
                line,
            )
            assert said, line
            assert "load re-split over 1 workers as level 2" in snap.notices
            assert snap.fatal is None
            lost_in_flight = int(said[1])
            level1 = snap.levels[0]
            assert level1.workers_lost == 1 and level1.completed >= before.levels[0].completed  # kept
            # the requests it had in flight are counted (cancelled), not left in flight for ever
            assert snap.cancelled >= lost_in_flight >= 1
            # the load goes on over the worker left, as level 2
            _, later, _ = wait_for(handle, lambda s: s.levels[-1].completed >= 4, 30, "level 2's requests")
            assert later.level_id == 2 and later.levels[-1].level_id == 2 and later.fatal is None
        finally:
            handle.stop()


def _workers_of(pid: int) -> list[psutil.Process]:
    """The engine workers among a process's children (spawned: not the resource tracker)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            line = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "multiprocessing" in line and "resource_tracker" not in line:
            found.append(child)
    return found


def test_bench_stopped_by_a_killed_worker_prints_its_table_and_its_records_name_the_signal(
    tmp_path: Path,
) -> None:
    """`--on-node-loss stop` (bench's default): a worker killed by SIGKILL ends the run with exit 1, and
    still the table of what was measured is printed and the results saved (before, a stop by any error
    printed no table). The killed worker's requests in flight are cancelled records saying "engine worker
    N killed by SIGKILL", in the requests log and in the session's replay (before, "its engine worker's
    node was lost", a Ray node's wording)."""
    out, log, session = tmp_path / "r.json", tmp_path / "requests.jsonl", tmp_path / "run.tokentop-session.gz"
    with SimServer("flat", time_scale=8.0) as sim:
        load = ("--concurrency", "4", "--workers", "2", "--duration", "60", "--isl", "16", "--osl", "32")
        outputs = ("--output", str(out), "--requests-log", str(log), "--record", str(session))
        argv = bench_process_argv("--url", sim.url, *load, *outputs)
        env = dict(os.environ, OPENAI_API_KEY="")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        try:
            deadline = time.monotonic() + 30.0
            while logged_lines(log) < LOGGED and time.monotonic() < deadline:
                time.sleep(0.05)
            workers = _workers_of(proc.pid)
            assert logged_lines(log) >= LOGGED and len(workers) == 2, [w.cmdline() for w in workers]
            workers[0].send_signal(signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 1, stderr
    said = re.search(r"engine worker (\d) \(of 2\) killed by SIGKILL at [\d.]+ s", stderr)
    assert said, stderr
    killed = f"engine worker {said[1]} killed by SIGKILL"
    (row,) = [line.split() for line in stdout.splitlines() if line.startswith("c=4 ")]  # the table's level
    assert int(row[1]) >= 8 and row[6] != "-" and row[-1] == "yes", stdout  # what was measured, steady
    results = json.loads(out.read_text())
    assert results["interrupted_by"] == "node_lost" and results["totals"]["completed"] >= LOGGED - 8
    cut = [r for r in read_jsonl(log) if r["error_class"] == "node_lost"]
    assert cut and all(r["error"] == killed for r in cut), cut[:2]
    replay = PlaybackEngine(read_session(session)).run_to_end()
    replayed = [replay.detail(r["id"]) for r in cut]
    assert all(d is not None and (d.error_class, d.error) == ("node_lost", killed) for d in replayed), (
        replayed
    )
