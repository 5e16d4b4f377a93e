"""The handle scrapes the server's /metrics beside the load, on its own thread, and a missing endpoint only
costs a line: the run goes on."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.engine_helpers import running_handle, wait_for
from tui.engine.config import EngineOptions, LoadTarget, WorkloadConfig
from tui.engine.host import server_scrape
from tui.engine.host.handle import EngineHandle
from tui.engine.results.files import to_json
from tui.engine.server_metrics.view import MISSING, OK, ServerView
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(60)
WORKLOAD = WorkloadConfig(isl=32, osl=64)
FAST = EngineOptions(metrics_interval_s=0.2)


def _wait_view(handle: EngineHandle, ok: Callable[[ServerView], bool], timeout_s: float) -> ServerView:
    """Poll the handle's published view (as a face's tick would) until ``ok``; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        view = handle.server_view()
        assert view is not None
        if ok(view):
            return view
        assert time.monotonic() < deadline, f"server view never got there: {view.status} {view.message}"
        time.sleep(0.05)


def test_the_servers_queue_shows_when_the_load_passes_its_slots(tmp_path: Path) -> None:
    """tiny-cpu has 4 slots: at 8 users the server itself reports 4 running and some waiting; every scrape
    is a line of the server metrics log."""
    log = tmp_path / "server.jsonl"
    opts = replace(FAST, server_metrics_log=str(log))
    with (
        SimServer("tiny-cpu", time_scale=8.0) as sim,
        running_handle(sim.start().url, LoadTarget(concurrency=8), tmp_path, workload=WORKLOAD, options=opts)
        as handle,
    ):  # fmt: skip
        wait_for(handle, lambda s: s.in_flight >= 8, 15, "8 in flight")
        # the steady state of 8 users on 4 slots (not a scrape during the ramp, when some are still arriving)
        view = _wait_view(
            handle,
            lambda v: (
                v.status == OK and v.current.get("running") == 4 and (v.current.get("waiting") or 0) > 0
            ),
            20,
        )
        # over the level's steady window (the start-up, before 8 are in flight, is left out)
        wait_for(handle, lambda s: s.levels[0].steady and s.levels[0].window_s >= 2.0, 30, "steady")
        results = to_json(handle.results())
    assert view.kind == "vllm" and view.model
    assert view.current["running"] == 4
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) >= view.scrapes and all(line["status"] == "ok" for line in lines)
    assert any(line["current"]["waiting"] for line in lines) and lines[-1]["kind"] == "vllm"
    assert [line["t_ns"] for line in lines] == sorted(line["t_ns"] for line in lines)
    # the results: the level's time-averaged server figures, and the run's source
    (level,) = results["levels"]
    server = level["server"]
    assert server["kind"] == "vllm" and server["scrapes"] >= 1
    assert 3.0 <= server["running_mean"] <= 4.0 and server["waiting_mean"] > 1.0
    assert results["server"]["status"] == "ok" and "running" in results["server"]["found"]
    assert view.url.endswith("/metrics") and "/v1" not in view.url


def test_an_ended_level_keeps_its_server_figures_after_the_ring_has_moved_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ring of 40 scrapes at 10 Hz holds four seconds (an hour at 1 Hz by default): the first level (8 users
    on 4 slots) ends and settles, the second runs until the first's scrapes are all gone from the ring, and
    the results still give the first level the server's queue as it was (from the ring at the end: null)."""
    monkeypatch.setattr(server_scrape, "SERVER_HISTORY", 40)
    opts = replace(FAST, metrics_interval_s=0.1)
    with (
        SimServer("tiny-cpu", time_scale=8.0) as sim,
        running_handle(sim.start().url, LoadTarget(concurrency=8), tmp_path, workload=WORKLOAD, options=opts)
        as handle,
    ):  # fmt: skip
        wait_for(handle, lambda s: s.levels[0].steady and s.levels[0].window_s >= 1.5, 30, "steady at 8")
        handle.set_load(LoadTarget(concurrency=1))
        # settled: ended, and its last requests are in (until then its window still grows)
        _, snap, _ = wait_for(handle, lambda s: len(s.levels) == 2 and s.levels[0].settled, 10, "1st settled")
        span = snap.levels[0].span_s(0.0)
        assert span is not None
        first_end_ns = handle.t0_ns + int(span[1] * 1e9)
        # until the oldest scrape in the ring is newer than the first level's window
        _wait_view(handle, lambda v: bool(v.readings) and v.readings[0].t_ns > first_end_ns + int(0.5e9), 20)
        wait_for(handle, lambda s: s.levels[1].steady and s.levels[1].window_s >= 1.0, 30, "steady at 1")
        view = handle.server_view()
        results = to_json(handle.results())
    assert view is not None and view.gauge_means(*_ns(handle.t0_ns, span))["running"] is None  # gone
    kept, now = (level["server"] for level in results["levels"])
    assert kept["scrapes"] >= 15 and 3.0 <= kept["running_mean"] <= 4.0 and kept["waiting_mean"] > 1.0
    assert now["running_mean"] == pytest.approx(1.0, abs=0.3) and now["waiting_mean"] < 0.3


def _ns(t0_ns: int, span_s: tuple[float, float]) -> tuple[int, int]:
    return t0_ns + int(span_s[0] * 1e9), t0_ns + int(span_s[1] * 1e9)


def test_a_server_without_metrics_gets_one_line_and_the_run_goes_on(tmp_path: Path) -> None:
    with (
        SimServer("flat", time_scale=4.0, metrics=False) as sim,
        running_handle(sim.start().url, LoadTarget(concurrency=2), tmp_path, workload=WORKLOAD, options=FAST)
        as handle,
    ):  # fmt: skip
        view = _wait_view(handle, lambda v: v.status == MISSING, 15)
        _, snap, _ = wait_for(handle, lambda s: s.completed >= 4, 20, "4 requests")
    assert view.message is not None and "\n" not in view.message and "404" in view.message
    assert snap.failed == 0 and snap.fatal is None


def test_scraping_off_means_no_view(tmp_path: Path) -> None:
    with (
        SimServer("flat", time_scale=4.0) as sim,
        running_handle(
            sim.start().url, LoadTarget(concurrency=1), tmp_path, workload=WORKLOAD,
            options=EngineOptions(server_metrics=False),
        ) as handle,
    ):  # fmt: skip
        wait_for(handle, lambda s: s.completed >= 1, 20, "a request")
        assert handle.server_view() is None
