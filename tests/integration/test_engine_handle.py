"""The handle's contract: quick start, clear fatal errors, clean stop, health, details, secrets kept."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.support.engine_helpers import read_jsonl, running_handle, wait_for
from tests.support.scripted_server import Request, Responder, ScriptedServer, normal_stream
from tui.engine.aggregate.series import IDLE_SERIES_CAP, SERIES_CAP
from tui.engine.aggregate.views import Views
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.host.probe import ProbeError, probe_server
from tui.engine.results.files import to_json
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(60)
SECRET = "sk-tokentop-test-7f3a9c1e5d"
WORKLOAD = WorkloadConfig(isl=16, osl=24)


def _children() -> set[int]:
    """This process's children but multiprocessing's resource tracker, which the first worker this process
    spawns starts for good (it would read as left behind by whichever test started it)."""
    found = set()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):  # ended meanwhile: not left behind
            if not any("resource_tracker" in part for part in child.cmdline()):
                found.add(child.pid)
    return found


def test_unreachable_server_is_one_fatal_line_and_start_does_not_block(tmp_path: Path) -> None:
    target = TargetConfig(base_url="http://127.0.0.1:9/v1", api_key=SECRET)
    with pytest.raises(ProbeError) as err:
        probe_server(target)
    assert str(err.value) == "cannot connect to http://127.0.0.1:9/v1: connection refused"
    handle = EngineHandle(target, WORKLOAD, LoadTarget())
    t0 = time.monotonic()
    handle.start()
    assert time.monotonic() - t0 < 1.0  # the probe runs on the handle's thread (its timeout is 10 s)
    try:
        assert handle.wait_ready(15)
        snap = handle.snapshot()
        assert snap.fatal == "cannot connect to http://127.0.0.1:9/v1: connection refused"
        assert SECRET not in repr(snap) and SECRET not in repr(handle.target)
    finally:
        handle.stop()
    assert handle.stopped


def test_snapshot_and_stop_before_start_are_harmless() -> None:
    handle = EngineHandle(TargetConfig(base_url="http://127.0.0.1:9/v1"), WORKLOAD, LoadTarget(concurrency=3))
    # The store a handle reads before `start` makes the run's own is a small one (not 11 MB written twice).
    assert {s.cap for s in handle.core.store.series.values()} == {IDLE_SERIES_CAP}
    snap = handle.snapshot()
    assert (snap.completed, snap.in_flight, snap.levels, snap.fatal) == (0, 0, (), None)
    handle.set_load(LoadTarget(concurrency=5))
    assert handle.load.concurrency == 5
    handle.stop()
    handle.stop()


def test_every_request_rejected_is_fatal(tmp_path: Path) -> None:
    async def handler(req: Request, resp: Responder) -> None:
        if req.path.endswith("/models"):
            await resp.json(200, b'{"object":"list","data":[{"id":"m1"}]}')
        else:
            await resp.json(404, b'{"error":{"message":"The model m1 does not exist."}}')

    server = ScriptedServerThread(handler)
    with server, running_handle(server.url, LoadTarget(concurrency=1), tmp_path) as handle:
        deadline = time.monotonic() + 10
        while handle.snapshot().fatal is None and time.monotonic() < deadline:
            time.sleep(0.02)
        snap = handle.snapshot()
    assert snap.model == "m1"
    assert snap.fatal == "every request fails: HTTP 404: The model m1 does not exist."


@pytest.mark.parametrize("probe", [True, False])
def test_probe_false_trusts_the_faces_own_check(tmp_path: Path, probe: bool) -> None:
    """`tokentop bench` checks the server itself before it creates any file; its handle must not ask
    /v1/models a second time (one round-trip less at start-up), yet still run the load."""

    async def handler(req: Request, resp: Responder) -> None:
        if req.path.endswith("/models"):
            await resp.json(200, b'{"object":"list","data":[{"id":"m1"}]}')
            return
        await resp.head()
        for event in normal_stream(["a", "b", "c"]):
            await resp.send(event)
        await resp.end()

    with ScriptedServerThread(handler) as server:
        target = TargetConfig(base_url=server.url, model="m1")
        # No /metrics scraping here: its kind guess after a failed scrape asks /v1/models too.
        options = EngineOptions(server_metrics=False)
        handle = EngineHandle(target, WORKLOAD, LoadTarget(concurrency=1), probe=probe, options=options)
        handle.start()
        try:
            assert handle.wait_ready(30.0)
            _, snap, _ = wait_for(handle, lambda s: s.completed >= 3, 20, "three requests")
            assert {s.cap for s in handle.core.store.series.values()} == {SERIES_CAP}  # the run's own store
        finally:
            handle.stop()
        paths = [r.path for r in server.requests]
    assert snap.failed == 0 and snap.model == "m1"
    assert sum(p.endswith("/models") for p in paths) == (1 if probe else 0)
    with pytest.raises(ValueError, match=r"needs target\.model"):
        EngineHandle(TargetConfig(base_url=server.url), WORKLOAD, LoadTarget(), probe=False)


def test_stop_cancels_in_flight_and_leaves_nothing_behind(tmp_path: Path) -> None:
    before_threads = {t.ident for t in threading.enumerate()}
    sim = SimServer("flat", time_scale=1.0)  # 50 tok/s: requests of 24 tokens stay in flight ~0.5 s
    with sim.start():
        before = _children()
        handle = EngineHandle(
            TargetConfig(base_url=sim.url, api_key=SECRET),
            WORKLOAD,
            LoadTarget(concurrency=4),
            workers=2,
            requests_log=tmp_path / "requests.jsonl",
        )
        handle.start()
        wait_for(
            handle,
            lambda s: s.in_flight == 4 and any(ln.state == "streaming" for ln in s.lanes),
            15,
            "4 streaming",
        )
        snap = handle.snapshot()
        streaming = [ln for ln in snap.lanes if ln.state == "streaming"]
        assert streaming and streaming[0].ttft_ms is not None and streaming[0].text_tail
        t0 = time.monotonic()
        handle.stop(finish_in_flight=False, timeout_s=2.0)
        # the 2 s timeout, then the workers' exit (slow when the machine is busy)
        assert time.monotonic() - t0 < 6.0
        snap = handle.snapshot()
        assert snap.cancelled == 4 and snap.failed == 0
        assert _children() == before, "engine worker processes left behind"
        # the requests log holds the cancelled ones too, flushed, and never the key
        records = read_jsonl(tmp_path / "requests.jsonl")
        assert sum(r["status"] == "cancelled" for r in records) == 4
        assert SECRET not in (tmp_path / "requests.jsonl").read_text()
        handle.stop()  # idempotent
    leftover = {t.name for t in threading.enumerate() if t.ident not in before_threads and t.is_alive()}
    assert not {n for n in leftover if n.startswith("tokentop")}, leftover


def test_detail_of_a_finished_request(tmp_path: Path) -> None:
    sim = SimServer("flat", time_scale=4.0, tokens_per_chunk=2, reasoning_tokens=4)
    with (
        sim,
        running_handle(sim.start().url, LoadTarget(concurrency=1), tmp_path, workload=WORKLOAD) as handle,
    ):
        _, _snap, _ = wait_for(handle, lambda s: s.completed >= 2, 15, "2 requests")
        first = read_jsonl(tmp_path / "requests.jsonl")[0]
        detail = handle.detail(first["id"])
        assert handle.detail(10**9) is None
    assert detail is not None and detail.state == "ok"
    assert detail.output_tokens == 24 and detail.token_source == "usage"
    assert len(detail.chunk_offsets_ms) == len(detail.chunk_tokens) == 13  # 1 alone, then pairs
    assert sum(detail.chunk_tokens) == 24
    assert list(detail.chunk_offsets_ms) == sorted(detail.chunk_offsets_ms)
    assert detail.ttft_ms == pytest.approx(detail.chunk_offsets_ms[0])
    assert detail.tpot_ms is not None and detail.itl_chunk.n == 12
    assert len(detail.text.split()) > 5  # reasoning then answer text
    assert detail.input_tokens == first["input_tokens"] and first["input_source"] == "usage"


def test_client_health_reports_a_starved_engine(tmp_path: Path) -> None:
    sim = SimServer("flat", time_scale=4.0)
    options = EngineOptions(test_block_loop_ms=25.0)  # block the worker's loop 25 ms every 100 ms
    with (
        sim,
        running_handle(
            sim.start().url, LoadTarget(concurrency=2), tmp_path, workload=WORKLOAD, options=options
        ) as handle,
    ):
        # sustained: flagged once two consecutive health windows (2 s each) were over the threshold
        _, snap, _ = wait_for(
            handle, lambda s: s.health.saturated and s.health.loop_lag_p99_ms > 10.0, 15, "saturated by lag"
        )
        results = to_json(handle.results())
    assert "event-loop lag p99" in snap.health.reason
    assert results["client"]["saturated"] is True
    # and a healthy engine is not flagged (thresholds are parameters: a loose one never trips)
    with (
        sim,
        running_handle(
            sim.start().url,
            LoadTarget(concurrency=2),
            tmp_path,
            workload=WORKLOAD,
            options=EngineOptions(lag_threshold_ms=1000, cpu_threshold=1.0),
        ) as handle,
    ):
        _, snap, _ = wait_for(handle, lambda s: s.completed >= 5, 10, "5 requests")
        assert not snap.health.saturated
        # the worker counts its asyncio tasks in each health window: at least one per user in flight
        _, snap, _ = wait_for(handle, lambda s: s.health.worker_tasks >= 2, 10, "a task count")
        assert snap.health.worker_tasks < 50


class ScriptedServerThread:
    """A ScriptedServer on its own event loop thread (the handle's workers are other processes)."""

    def __init__(self, handler) -> None:  # type: ignore[no-untyped-def]
        import asyncio

        self._loop = asyncio.new_event_loop()
        self._server = ScriptedServer(handler)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def requests(self) -> list[Request]:
        """What the clients sent so far."""
        return list(self._server.requests)

    def __enter__(self) -> ScriptedServerThread:
        import asyncio

        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._server.start(), self._loop).result(5)
        return self

    def __exit__(self, *exc: object) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(self._server.close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def test_starts_under_a_captured_stderr_like_a_running_textual_app() -> None:
    # Textual swaps sys.stderr for an object without a file descriptor; spawn must still work (in a fresh
    # process, so the resource tracker is not already running from earlier tests).
    code = """
import io, sys, time
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.sim.launch import SimServer

class Capture(io.StringIO):
    def fileno(self):
        return -1  # what Textual's stderr capture answers

if __name__ == "__main__":
    with SimServer("flat", time_scale=4.0) as sim:
        real, sys.stderr = sys.stderr, Capture()
        handle = EngineHandle(TargetConfig(base_url=sim.url), WorkloadConfig(isl=8, osl=8), LoadTarget())
        handle.start()
        deadline = time.monotonic() + 20
        while handle.snapshot().completed < 2 and not handle.snapshot().fatal and time.monotonic() < deadline:
            time.sleep(0.02)
        snap = handle.snapshot()
        handle.stop()
        sys.stderr = real
        print(snap.completed, snap.fatal)
"""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    completed, fatal = out.stdout.split(maxsplit=1)
    assert int(completed) >= 2 and fatal.strip() == "None"


def test_the_reader_thread_alone_computes_the_views_and_a_level_change_shows_at_once(tmp_path: Path) -> None:
    """While the reader thread reads batches it is the only one computing the costly views: snapshots
    taken on this thread read the published bundle. A new level still shows in the very next snapshot
    (set_load has the reader publish it); `stop` computes the run's last views on its caller's thread, and
    snapshots after it never recompute them."""
    sim = SimServer("flat", time_scale=4.0)
    with (
        sim,
        running_handle(sim.start().url, LoadTarget(concurrency=2), tmp_path, workload=WORKLOAD) as handle,
    ):
        wait_for(handle, lambda s: s.completed >= 4, 15, "4 requests")
        computed_on: set[str] = set()
        refresh = handle.core.store.refresh_views

        def spy(now_ns: int, *, force: bool = False) -> Views:
            computed_on.add(threading.current_thread().name)
            return refresh(now_ns, force=force)

        handle.core.store.refresh_views = spy  # type: ignore[method-assign]  # a spy on the bound method
        for _ in range(20):
            handle.snapshot()
            time.sleep(0.02)
        assert computed_on == {"tokentop-engine-reader"}
        handle.set_load(LoadTarget(concurrency=3))
        snap = handle.snapshot()
        assert [lv.level_id for lv in snap.levels] == [1, 2] and snap.levels[0].ended_s is not None
        assert computed_on == {"tokentop-engine-reader"}
        computed_on.clear()
        handle.stop()
        # the run's last views, once every batch is in (the reader may publish some before it ends)
        assert threading.current_thread().name in computed_on
        computed_on.clear()
        final = handle.snapshot()
    assert computed_on == set()  # stopped: never again (the rolling windows would slide on, unrecorded)
    assert final.levels[-1].ended_s is not None
