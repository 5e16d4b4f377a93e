"""Engine workers on a real two-node Ray cluster (`ray.cluster_utils.Cluster`, on this machine) against the
simulator: the same figures as local workers, a removed node reported lost with the survivors going on,
a frozen agent's workers stopping by themselves, and a node clock offset estimated and taken off.

The cluster binds this machine's own interface address (forced to 127.0.0.1 its clients time out); it never
leaves the machine. Run apart from the timing tests (`-m ray`): Ray's daemons widen every latency tail.
"""

from __future__ import annotations

import os
import platform
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

import tui  # noqa: E402
from tests.support.engine_helpers import joined, read_jsonl, running_handle, wait_for  # noqa: E402
from tui.engine.config import EngineOptions, LoadTarget, RayPlacement, WorkloadConfig  # noqa: E402
from tui.engine.host.handle import EngineHandle  # noqa: E402
from tui.engine.host.ray_pool import connect, ray_check, version_mismatch  # noqa: E402
from tui.engine.results.files import to_json  # noqa: E402
from tui.engine.snapshot import Snapshot  # noqa: E402
from tui.sim.launch import SimServer  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]
MS = 1e6
STORE = 150 * 1024 * 1024
WORKLOAD = WorkloadConfig(isl=32, osl=24)
# No log monitor: the face joins with log_to_driver off, nothing reads it (about 1 s of CPU a node less of
# the start, which shares the machine with the timing tests).
NODE = {"num_cpus": 2, "object_store_memory": STORE, "include_log_monitor": False}


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, Any]]:
    """A head and one more node; the driver (this process, the face) joins it."""
    c: Any = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    second = c.add_node(**NODE)
    c.wait_for_nodes()
    connect(c.address)
    try:
        yield c, second
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """One simulator for the tests that keep no truth log (each run its own requests, one after another)."""
    with SimServer("flat", time_scale=2.0) as sim:
        yield sim.start().url


def _options(address: str, **placement: Any) -> EngineOptions:
    return EngineOptions(
        server_metrics=False, placement=RayPlacement(address=address, head_workers=True, **placement)
    )


def _measure(handle: EngineHandle, requests: int) -> tuple[Snapshot, dict[str, Any]]:
    def enough(s: Snapshot) -> bool:
        lv = s.levels[-1] if s.levels else None
        return s.completed >= requests and lv is not None and lv.steady and lv.window_completed >= 20

    wait_for(handle, enough, 60, f"{requests} requests and a steady window")
    handle.set_load(LoadTarget(concurrency=4, paused=True))
    wait_for(handle, lambda s: s.in_flight == 0, 10, "drain")
    return handle.snapshot(), to_json(handle.results())


def _timing_errors(tmp_path: Path, truth_log: Path) -> dict[str, float]:
    """Median |client - server| of TTFT and chunk gaps over the joined requests (ms)."""
    ttft, gaps = [], []
    for rec, tr in joined(tmp_path / "requests.jsonl", truth_log):
        c, s = np.array(rec["chunk_ns"]), np.array(tr["chunk_ns"])
        ttft.append(abs((c[0] - rec["sent_ns"]) - (s[0] - tr["arrival_ns"])) / MS)
        gaps.extend(np.abs(np.diff(c) - np.diff(s)) / MS)
    return {"ttft": float(np.median(ttft)), "gap": float(np.median(gaps)), "n": len(ttft)}


def test_a_ray_run_measures_what_a_local_run_does(cluster: tuple[Any, Any], tmp_path: Path) -> None:
    c, _ = cluster
    figures = {}
    for name, options in (("local", EngineOptions(server_metrics=False)), ("ray", _options(c.address))):
        run_dir = tmp_path / name
        run_dir.mkdir()
        truth = run_dir / "truth.jsonl"
        with (
            SimServer("flat", time_scale=2.0, truth_log=truth) as sim,
            running_handle(
                sim.start().url, LoadTarget(concurrency=4), run_dir, workload=WORKLOAD, workers=2,
                options=options,
            ) as handle,
        ):  # fmt: skip
            snap, results = _measure(handle, 40)
        (lv,) = snap.levels
        figures[name] = (lv, results, _timing_errors(run_dir, truth))
    (local, _, local_err), (remote, results, remote_err) = figures["local"], figures["ray"]
    assert remote.completed >= 40 and remote.failed == 0
    assert remote.steady and local.steady
    # the flat profile at time_scale 2: every stream 100 tok/s, 4 of them
    assert remote.output_tps == pytest.approx(local.output_tps, rel=0.1)
    assert remote.output_tps == pytest.approx(400.0, rel=0.15)
    assert remote.ttft.p50 == pytest.approx(local.ttft.p50, abs=3.0)
    assert remote.mean_osl == local.mean_osl == 24
    # against the server's own stamps (same host: the offset is exactly 0)
    assert remote_err["n"] >= 40 and remote_err["ttft"] < 1.5 and remote_err["gap"] < 1.5, remote_err
    assert remote_err["ttft"] < local_err["ttft"] + 1.0, (remote_err, local_err)
    nodes = results["client"]["nodes"]
    assert len(nodes) == 2 and all(n["same_clock"] and n["workers"] == 1 for n in nodes)
    assert results["config"]["placement"]["ray"] == c.address


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return False


def test_a_clock_offset_is_taken_off_and_a_frozen_agent_s_workers_stop_by_themselves(
    cluster: tuple[Any, Any], tmp_path: Path
) -> None:
    """One run for two things (a Ray run's start costs seconds). The agents read an hour ahead (and a boot id
    of their own); every stamp the face gets is back in its clock, so the server's stamps (same host) still
    meet the client's within the estimate's bound. Then, as level 2, SIGSTOP one node's agent (a hung
    machine): its worker hears no heartbeat and stops within the dead-man time while the agent is still
    frozen; the face reports the node lost and stops the run (its silence is judged in the face's clock)."""
    c, _ = cluster
    hour = 3_600 * 10**9
    truth = tmp_path / "truth.jsonl"
    options = _options(c.address, test_clock_offset_ns=hour, dead_after_s=1.5, lost_after_s=4.0)
    with (
        SimServer("flat", time_scale=2.0, truth_log=truth) as sim,
        running_handle(sim.start().url, LoadTarget(concurrency=4), tmp_path, workload=WORKLOAD, workers=2,
                       options=options) as handle,
    ):  # fmt: skip
        snap, results = _measure(handle, 30)
        t0 = handle.t0_ns
        handle.set_load(LoadTarget(concurrency=4))  # level 2
        done = snap.completed
        wait_for(handle, lambda s: s.completed >= done + 8, 30, "8 requests of level 2")
        assert handle._workers.ray is not None
        agent = handle._workers.ray.agent_of(1)
        agent_pid = ray.get(agent.pid.remote())
        (child,) = ray.get(agent.pids.remote()).values()
        os.kill(agent_pid, signal.SIGSTOP)
        try:
            frozen = time.monotonic()
            while _running(child) and time.monotonic() - frozen < 10.0:
                time.sleep(0.05)
            stopped_after = time.monotonic() - frozen
            assert not _running(child), "the frozen node's worker kept running"
            assert psutil.Process(agent_pid).status() == psutil.STATUS_STOPPED  # it stopped on its own
            assert 1.0 <= stopped_after <= 4.0, stopped_after
            deadline = time.monotonic() + 10.0
            while handle.fatal is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert handle.fatal is not None and " lost at " in handle.fatal, handle.fatal
            assert any(" silent for 2 s" in n for n in handle.snapshot().notices)  # shown before it was lost
            assert time.monotonic() - frozen <= 4.0 + 2.0
        finally:
            if psutil.pid_exists(agent_pid):
                os.kill(agent_pid, signal.SIGCONT)
        frozen_results = to_json(handle.results())
    # the clock, over level 1 (drained before level 2 began)
    nodes = results["client"]["nodes"]
    assert all(
        not n["same_clock"] and abs(n["clock_offset_ms"] - hour / MS) <= n["clock_bound_ms"] for n in nodes
    )
    bound_ms = max(n["clock_bound_ms"] for n in nodes)
    pairs = [(rec, tr) for rec, tr in joined(tmp_path / "requests.jsonl", truth) if rec["level"] == 1]
    assert len(pairs) >= 30
    # a chunk is stamped after the server wrote it: never earlier than the bound allows
    deliver = [
        (c_ - s_) / MS for rec, tr in pairs for c_, s_ in zip(rec["chunk_ns"], tr["chunk_ns"], strict=True)
    ]
    assert min(deliver) >= -bound_ms - 0.05 and float(np.median(deliver)) < 5.0 + bound_ms
    (lv,) = snap.levels
    assert lv.steady and lv.window_from_s is not None and lv.window_to_s is not None
    assert 0.0 <= lv.window_from_s < lv.window_to_s <= snap.elapsed_s
    assert lv.output_tps == pytest.approx(400.0, rel=0.15)
    assert all(t0 <= r["sent_ns"] for r in read_jsonl(tmp_path / "requests.jsonl"))
    # the frozen node
    assert frozen_results["interrupted_by"] == "node_lost"
    assert "1 of 2 workers" in handle.fatal


def test_ray_check_names_each_node_and_whether_it_reaches_the_url(
    cluster: tuple[Any, Any], sim_url: str
) -> None:
    c, _ = cluster
    url = sim_url
    lines = ray_check(c.address, url)
    assert len(lines) == 3, lines
    assert all("same clock as this machine" in line and f"reaches {url}" in line for line in lines[1:]), lines


def test_a_version_mismatch_is_one_line_naming_the_node() -> None:
    info = {"tokentop": "0.0.9", "python": platform.python_version(), "ray": ray.__version__}
    line = version_mismatch("gpu-7", info)
    assert line is not None and line.startswith("node gpu-7 runs tokentop 0.0.9,") and "\n" not in line
    assert version_mismatch("gpu-7", dict(info, tokentop=tui.__version__)) is None
    assert version_mismatch("gpu-7", dict(info, tokentop=tui.__version__, ray="2.0.0")) is not None


def test_a_removed_node_is_lost_within_5_s_and_the_survivors_go_on(
    cluster: tuple[Any, Any], sim_url: str, tmp_path: Path
) -> None:
    """Last in the module: the second node goes for good."""
    c, second = cluster
    options = _options(c.address, on_node_loss="continue")
    with running_handle(sim_url, LoadTarget(concurrency=4), tmp_path, workload=WORKLOAD, workers=2,
                        options=options) as handle:  # fmt: skip
        wait_for(handle, lambda s: s.completed >= 8, 30, "8 requests")
        c.remove_node(second, allow_graceful=False)
        removed = time.monotonic()
        _, snap, waited = wait_for(handle, lambda s: any(" lost at " in n for n in s.notices), 10, "the loss")
        assert waited <= 5.0, waited
        # the survivor's own requests at the re-split load (level 2): its users go on under level 1 until the
        # new share reaches it, which a loaded Ray can take a while to deliver
        _, snap, _ = wait_for(handle, lambda s: len(s.levels) > 1 and s.levels[1].completed >= 4, 30,
                              "survivors' requests at level 2")  # fmt: skip
        assert time.monotonic() - removed < 30
        results = to_json(handle.results())
    line = next(n for n in snap.notices if " lost at " in n)
    assert "1 of 2 workers" in line and "level 1 ends there" in line
    assert any("load re-split over 1 workers as level 2" in n for n in snap.notices)
    first, second_level = snap.levels[0], snap.levels[1]
    assert first.workers_lost == 1 and second_level.completed >= 1
    assert handle.workers == 2 and snap.in_flight <= 4
    lost = [r for r in read_jsonl(tmp_path / "requests.jsonl") if r.get("error_class") == "node_lost"]
    assert all(r["status"] == "cancelled" for r in lost)
    assert [n["lost_at_s"] is not None for n in results["client"]["nodes"]].count(True) == 1
