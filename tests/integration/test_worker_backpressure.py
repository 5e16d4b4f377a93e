"""A face that falls behind: a real worker process against the simulator, its data pipe shrunk to one page and
left unread for a while. The worker must not queue a batch per interval meanwhile (its memory would grow with
every interval the face is behind), and the batches it sends when the face reads again must carry everything
it measured: every request's record once, every token."""

from __future__ import annotations

import fcntl
import pickle
import time
from multiprocessing.connection import Connection

import httpx
import pytest

from tui.engine.config import EngineOptions, TargetConfig, WorkloadConfig
from tui.engine.host.worker_pool import ensure_resource_tracker, spawn_worker
from tui.engine.wire import ApplyShare, Batch, Goodbye, Stop, WorkerShare, WorkerSpec
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(60)

INTERVAL_S = 0.02
UNREAD_S = 2.0
"""100 batch intervals with nobody reading."""


def _read_all(data: Connection, until: float) -> list[object]:
    """Every message the worker sends until its goodbye (bounded by ``until``, a monotonic deadline)."""
    messages: list[object] = []
    while time.monotonic() < until:
        if not data.poll(0.5):
            continue
        msg = pickle.loads(data.recv_bytes())
        messages.append(msg)
        if isinstance(msg, Goodbye):
            return messages
    raise AssertionError(f"no goodbye within the deadline ({len(messages)} messages)")


def _read_for(data: Connection, seconds: float) -> list[object]:
    messages: list[object] = []
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if data.poll(left):
            messages.append(pickle.loads(data.recv_bytes()))
    return messages


def _read_until_a_record(data: Connection, timeout_s: float) -> list[object]:
    """Read as a face would until a batch carries a finished request (bounded): the worker's start alone
    (spawn, imports, its client) takes 0.5 s on an idle machine and 3 s at load 8 on two cores."""
    messages: list[object] = []
    end = time.monotonic() + timeout_s
    while (left := end - time.monotonic()) > 0:
        if data.poll(left):
            messages.append(msg := pickle.loads(data.recv_bytes()))
            if isinstance(msg, Batch) and msg.records:
                return messages
    raise AssertionError(f"no request finished in {timeout_s} s ({len(messages)} messages)")


def test_a_face_that_stops_reading_gets_one_batch_of_everything_not_one_per_interval() -> None:
    ensure_resource_tracker()
    with SimServer("flat", time_scale=8.0) as sim:
        url = sim.start().url
        model = httpx.get(f"{url}/models", timeout=5.0).json()["data"][0]["id"]
        spec = WorkerSpec(
            index=0,
            workers=1,
            target=TargetConfig(base_url=url, timeout_s=10.0),
            workload=WorkloadConfig(isl=32, osl=16),
            model=model,
            options=EngineOptions(batch_interval_s=INTERVAL_S),
        )
        proc, cmd, data = spawn_worker(spec)
        try:
            # One page of pipe: a batch or two fill it, and from then on the worker's sender waits on us.
            fcntl.fcntl(data.fileno(), fcntl.F_SETPIPE_SZ, 4096)
            cmd.send(ApplyShare(WorkerShare(level_id=1, concurrency=8)))
            before = _read_until_a_record(data, 30.0)  # the load is running
            paused_ns = time.perf_counter_ns()  # the workers' clock too (CLOCK_MONOTONIC)
            time.sleep(UNREAD_S)  # the face falls behind: nobody reads
            resumed_ns = time.perf_counter_ns()
            behind = _read_for(data, 0.5)
            cmd.send(Stop(finish_in_flight=True, timeout_s=5.0))
            after = _read_all(data, time.monotonic() + 20.0)
        finally:
            proc.join(10.0)
            if proc.is_alive():
                proc.terminate()
    batches = [m for m in before + behind + after if isinstance(m, Batch)]
    # 100 intervals went by unread; what was built meanwhile is what fits the pipe's page, the batch being
    # written and the one queued behind it (one per interval without the hold: about 100).
    built_unread = [b for b in batches if paused_ns < b.t_ns < resumed_ns]
    assert len(built_unread) <= 12, len(built_unread)
    records = [r for b in batches for r in b.records]
    seqs = sorted(r.seq for r in records)
    assert len(records) > 20 and seqs == list(range(len(records))), "a record was lost or sent twice"
    assert all(r.error is None for r in records), {r.error for r in records}
    # Every token the worker counted reached us: the batches' tokens are the records' own counts.
    assert sum(b.tokens for b in batches) == sum(r.output_tokens or 0 for r in records) == 16 * len(records)
    # The requests that finished while nobody read came in one batch built once we read again.
    assert max(len(b.records) for b in batches if b.t_ns >= resumed_ns) >= 8
