"""The node agent without Ray: it starts the unchanged worker as a plain child, relays its messages in bulk
collects (rebased by the node's offset), keeps command order, and its worker stops by itself when nobody
collects (the dead-man switch); plus the lane budget through a real handle."""

from __future__ import annotations

import pickle
import socket
import time
from pathlib import Path

import pytest

from tests.support.engine_helpers import running_handle, wait_for
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.probe import probe_server
from tui.engine.load.split import split_load
from tui.engine.remote.agent import CLOSED, NodeAgent
from tui.engine.remote.clock import estimate_offset
from tui.engine.snapshot import Snapshot
from tui.engine.wire import ApplyShare, Batch, Goodbye, Stop, WorkerMessage, WorkerSpec
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(60)
MS = 1_000_000


def _spec(url: str) -> WorkerSpec:
    target = TargetConfig(base_url=url, timeout_s=10.0)
    model = probe_server(target)
    return WorkerSpec(0, 1, target, WorkloadConfig(isl=16, osl=8), model, EngineOptions(server_metrics=False))


def _collect_until(agent: NodeAgent, done: object, timeout_s: float) -> list[WorkerMessage | bytes]:
    """Drain (each call a heartbeat) until ``done(messages)``; bounded."""
    got: list[WorkerMessage | bytes] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for _, raw in agent.collect(0.2):
            got.append(raw if raw == CLOSED else pickle.loads(raw))
        if done(got):  # type: ignore[operator]
            return got
    raise AssertionError(f"timed out; got {len(got)} messages")


def _records(got: list[WorkerMessage | bytes]) -> int:
    return sum(len(m.records) for m in got if isinstance(m, Batch))


def test_the_agent_relays_a_plain_worker_and_its_worker_stops_when_nobody_collects() -> None:
    with SimServer("flat", time_scale=4.0) as sim:
        url = sim.start().url
        agent = NodeAgent(dead_after_s=1.0)
        [pid] = agent.spawn([_spec(url)], {}, 0)
        assert pid > 0
        # commands sent out of order arrive in order: the pause (seq 1) must come after the start (seq 0)
        share = split_load(LoadTarget(concurrency=2), 1, 1)[0]
        agent.send(0, 1, ApplyShare(split_load(LoadTarget(concurrency=2), 1, 2)[0]))
        agent.send(0, 0, ApplyShare(share))
        got = _collect_until(agent, lambda g: _records(g) >= 4, 30.0)
        batches = [m for m in got if isinstance(m, Batch)]
        assert batches[-1].level_id == 2  # both applied, the later last
        assert all(r.status == "ok" for b in batches for r in b.records)
        # now nobody collects: no heartbeat reaches the worker, which stops by itself within about 1 s
        stopped_from = time.monotonic()
        agent._procs[0].wait(timeout=15.0)
        waited = time.monotonic() - stopped_from
        assert 0.5 <= waited <= 10.0, waited
        tail = _collect_until(agent, lambda g: CLOSED in g, 5.0)
        assert any(isinstance(m, Goodbye) for m in tail)  # it said goodbye: a stop, not a crash
        agent.stop_workers(1.0)


def test_a_node_clock_offset_is_estimated_and_taken_off_every_stamp() -> None:
    offset = 3_600 * 1_000 * MS  # an hour ahead, as another machine's clock would be
    with SimServer("flat", time_scale=4.0) as sim:
        url = sim.start().url
        agent = NodeAgent(dead_after_s=5.0, test_clock_offset_ns=offset)
        est = estimate_offset(agent.clock, time.perf_counter_ns)
        assert abs(est.offset_ns - offset) <= est.bound_ns
        agent.spawn([_spec(url)], {}, est.offset_ns)
        agent.send(0, 0, ApplyShare(split_load(LoadTarget(concurrency=1), 1, 1)[0]))
        before = time.perf_counter_ns()
        got = _collect_until(agent, lambda g: _records(g) >= 2, 30.0)
        after = time.perf_counter_ns()
        recs = [r for m in got if isinstance(m, Batch) for r in m.records]
        # in the face's clock again: every send inside this test's own span
        assert all(before - 5_000 * MS <= r.sent_ns <= r.end_ns <= after for r in recs)
        agent.send(0, 1, Stop(False, 0.0))
        _collect_until(agent, lambda g: CLOSED in g, 10.0)
        agent.stop_workers(1.0)


def test_a_worker_sends_lane_deltas_only_within_its_lane_budget(tmp_path: Path) -> None:
    """max_lanes 2 over 1 worker: a budget of 4 lanes (the minimum), whatever the concurrency."""
    with SimServer("flat", time_scale=0.5) as sim:
        options = EngineOptions(max_lanes=2, server_metrics=False)
        workload = WorkloadConfig(isl=16, osl=64)
        with running_handle(
            sim.start().url, LoadTarget(concurrency=12), tmp_path, workload=workload, options=options
        ) as handle:
            wait_for(handle, lambda s: s.in_flight == 12, 20, "12 in flight")
            known: list[tuple[int, int]] = []  # (lanes known, requests in flight) at each look

            def many_in_flight_after_a_completion(snap: Snapshot) -> bool:
                with handle._lock:
                    known.append((len(handle.core.store.lanes.live), handle.core.store.in_flight()))
                return snap.completed >= 1 and known[-1][1] >= 8

            # All 12 start together and end together: just after the first completion the closed loop may
            # not have replaced the others yet (7 in flight at -n 6 in CI), so look until it has.
            wait_for(handle, many_in_flight_after_a_completion, 30, ">= 8 in flight after a completion")
            assert max(lanes for lanes, _ in known) <= 4 + 1, known
            snap = handle.snapshot()
            assert snap.output_tps > 0  # the tokens of lanes left out still count live


def test_the_agent_says_whether_its_node_reaches_the_target() -> None:
    with SimServer("flat") as sim:
        url = sim.start().url
        assert NodeAgent().reaches(url) == ""
    with socket.socket() as s:  # a port nobody listens on: bound here, never listening
        s.bind(("127.0.0.1", 0))
        why = NodeAgent().reaches(f"http://127.0.0.1:{s.getsockname()[1]}/v1")
    assert why.startswith("cannot connect to 127.0.0.1:") and "\n" not in why


def test_files_named_by_path_are_written_on_the_node_and_the_spec_points_at_them(tmp_path: Path) -> None:
    """What the face ships (CA bundle, tokenizer, dataset, as bytes) lands in the agent's own folder."""
    from tui.engine.config import DatasetConfig
    from tui.engine.remote.agent import _repoint

    face = {"/face/ca.pem": b"PEM", "/face/tok.json": b"{}", "/face/prompts.jsonl": b'{"prompt": "hi"}\n'}
    spec = WorkerSpec(
        0, 1, TargetConfig(base_url="http://127.0.0.1:1/v1", ca_cert="/face/ca.pem"),
        WorkloadConfig(tokenizer="/face/tok.json", dataset=DatasetConfig(path="/face/prompts.jsonl")),
        "m", EngineOptions(),
    )  # fmt: skip
    agent = NodeAgent()
    paths = agent._write_files(face)
    moved = _repoint(spec, paths)
    assert moved.target.ca_cert is not None and moved.workload.tokenizer is not None
    assert moved.workload.dataset is not None
    for was, now in (
        ("/face/ca.pem", moved.target.ca_cert),
        ("/face/tok.json", moved.workload.tokenizer),
        ("/face/prompts.jsonl", moved.workload.dataset.path),
    ):
        assert now != was and Path(now).read_bytes() == face[was]
    assert moved.target.api_key == spec.target.api_key and moved.model == "m"
    agent.stop_workers(0.1)
    assert not Path(moved.target.ca_cert).exists()  # the copies go with the agent's workers
