"""A local engine worker killed by the kernel (the OOM killer's SIGKILL, or `kill -9`): one line naming the
worker and the signal, its in-flight requests counted as lost, what was measured kept, and the run goes on
over the workers left or stops as `--on-node-loss` says. Before, any worker death was the run's fatal
error ("exited unexpectedly") and its requests in flight were never accounted for."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from tests.support.engine_helpers import wait_for
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.host.pool import lost_line
from tui.engine.snapshot import Snapshot
from tui.engine.wire import WorkerLost
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)


def test_the_line_names_the_worker_the_signal_and_what_was_in_flight() -> None:
    lost = WorkerLost("worker 1", 3_500_000_000, (1,), "SIGKILL")
    assert lost_line(lost, 3, 4, 2, 1_000_000_000) == (
        "engine worker 1 (of 4) killed by SIGKILL at 2.5 s (the kernel's OOM killer, or kill -9): "
        "3 in flight lost; level 2 ends there"
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
