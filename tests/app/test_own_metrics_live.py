"""The live app's own ``/metrics`` (``--serve-metrics-port``) while it runs: the real `TokentopApp` under
Pilot, its engine made from the live command's flags as `tokentop` makes it (`tui.app.run.live_engine`),
against the simulator. Each scrape lies between two engine snapshots; a load key's new level and target are
served at once; paused and drained, the scrape, the engine's snapshot and the status bar say the same.
`tokentop watch` serves what a watch has: its run and its canary, no load."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.pilot import Pilot

from tests.app.test_faults_live import flat, until
from tests.integration.test_own_telemetry import Samples, parse, value
from tests.support.ports import free_port
from tui.app.app import TokentopApp
from tui.app.run import app_settings, live_engine
from tui.app.themes import load_themes
from tui.app.watch import watch_engine
from tui.cli import build_parser
from tui.cli.live import live_config
from tui.cli.watch import watch_config
from tui.engine.api import Engine
from tui.engine.snapshot import Snapshot
from tui.own_metrics import serving_metrics
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("small-gpu", time_scale=4.0) as server:
        yield server


async def scrape(url: str) -> Samples:
    """One scrape, off the app's loop (the endpoint answers from its own thread)."""
    response = await asyncio.to_thread(httpx.get, url, timeout=5.0)
    response.raise_for_status()
    return parse(response.text)


async def wait_for(pilot: Pilot[Any], what: str, ok: Callable[[], bool], timeout_s: float) -> None:
    """Let the app run (its own tick draws it) until ``ok()``; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        await pilot.pause(0.1)


def figures(snap: Snapshot) -> tuple[object, ...]:
    """What the paused scrape is held to: the counters, in flight, the level, its window's count and the
    whole run's E2E count (the last two from the views the reader publishes every half second)."""
    level = next((lv for lv in snap.levels if lv.level_id == snap.level_id), None)
    window = None if level is None else level.window_completed
    counters = (snap.completed, snap.failed, snap.cancelled, snap.in_flight, snap.output_tokens)
    return (*counters, snap.input_tokens, snap.level_id, window, sum(snap.e2e_hist.counts))


async def settled_scrape(
    pilot: Pilot[Any], engine: Engine, url: str, timeout_s: float
) -> tuple[Samples, Snapshot]:
    """A scrape between two snapshots 0.2 s apart with the same `figures`, nothing in flight and the views
    caught up with the counters (every completion in the E2E histogram): the load drained and its last
    batches in (in flight reads 0 for a moment before a request sent at the pause is in), and the views,
    which lag the counters by up to `Store.heavy_interval_s`, republished since."""
    deadline = time.monotonic() + timeout_s
    while True:
        first = engine.snapshot()
        if first.in_flight == 0 and sum(first.e2e_hist.counts) == first.completed:
            scraped = await scrape(url)
            await pilot.pause(0.2)
            then = engine.snapshot()
            if figures(then) == figures(first):
                return scraped, then
        assert time.monotonic() < deadline, f"the paused load never settled: {figures(engine.snapshot())}"
        await pilot.pause(0.1)


def sent(snap: Snapshot) -> int:
    return snap.completed + snap.failed + snap.cancelled + snap.in_flight


async def test_the_live_apps_metrics_are_its_engines_figures_as_it_runs(
    sim: SimServer, tmp_path: Path
) -> None:
    ns = build_parser().parse_args(
        ["--url", sim.url, "--concurrency", "2", "--osl", "8", "--isl", "16", "--no-isl-probe", "--no-record",
         "--serve-metrics-port", str(free_port())]
    )  # fmt: skip
    config = live_config(ns)
    with serving_metrics(config.own_metrics) as metrics:
        assert metrics is not None
        url = f"http://127.0.0.1:{metrics.port}/metrics"
        engine = live_engine(config, config.server.at(None), metrics)
        settings = replace(app_settings(config, load_themes(), "dark"), freeze_gc=False, save_dir=tmp_path)
        try:
            engine.start()
            app = TokentopApp(engine, settings)
            async with app.run_test(size=(160, 48)) as pilot:
                await wait_for(pilot, "completions", lambda: engine.snapshot().completed >= 6, 40.0)
                # running: each counter served lies between the snapshots taken either side of the scrape
                before = engine.snapshot()
                running = await scrape(url)
                after = engine.snapshot()
                for name, field in (("requests_completed_total", "completed"), ("output_tokens_total",
                                    "output_tokens"), ("input_tokens_total", "input_tokens")):  # fmt: skip
                    got = value(running, "tokentop_" + name)
                    assert getattr(before, field) <= got <= getattr(after, field), name
                assert sent(before) <= value(running, "tokentop_requests_sent_total") <= sent(after)
                assert 0 <= value(running, "tokentop_requests_in_flight") <= 2
                assert value(running, "tokentop_level_id") == before.level_id == 1
                assert value(running, "tokentop_target_users") == 2
                # a load key: the new level and its target are served at once
                await pilot.press("plus")
                stepped = engine.load
                assert stepped.value > 2 and engine.level_id == 2
                raised = await scrape(url)
                assert value(raised, "tokentop_level_id") == 2
                assert value(raised, "tokentop_target_users") == stepped.value
                # paused and drained: the scrape, the engine and the status bar agree to the request
                await pilot.press("space")
                paused, snap = await settled_scrape(pilot, engine, url, 30.0)
                shown, _ = await until(app, pilot, "the pause", lambda t: "paused" in t, 5.0)
                screen = flat(shown)
                await pilot.press("q")
        finally:
            engine.stop()
    assert value(paused, "tokentop_requests_completed_total") == snap.completed >= 6
    assert f"done {snap.completed}" in screen
    assert value(paused, "tokentop_requests_sent_total") == snap.completed + snap.failed + snap.cancelled
    assert value(paused, "tokentop_output_tokens_total") == snap.output_tokens == 8 * snap.completed
    assert value(paused, "tokentop_input_tokens_total") == snap.input_tokens > 0
    assert value(paused, "tokentop_requests_in_flight") == 0
    assert value(paused, "tokentop_load_paused") == 1 and value(paused, "tokentop_target_users") == 0
    assert value(paused, "tokentop_level_id") == snap.level_id == 2
    levels = {lv.level_id: lv for lv in snap.levels}
    assert value(paused, "tokentop_level_requests_completed") == levels[2].window_completed
    assert value(paused, "tokentop_e2e_seconds_count") == snap.completed


def test_a_watch_serves_its_run_and_no_load_it_does_not_send(sim: SimServer) -> None:
    """`tokentop watch`, its engine made from the watch's flags as the command makes it: the endpoint serves
    the run's info (the model the server's view names), and no request counters, target, level or client
    health: it sends no load (it served a paused load and a loop lag of 0 it never measured before). Its
    canary's figures are served as the bench's are (test_own_telemetry; the families: test_own_metrics)."""
    ns = build_parser().parse_args(
        ["watch", "--url", sim.url, "--interval", "0.2", "--serve-metrics-port", str(free_port())]
    )
    config = watch_config(ns)
    with serving_metrics(config.own_metrics) as metrics:
        assert metrics is not None
        engine = watch_engine(config, metrics)
        try:
            engine.start()
            deadline = time.monotonic() + 20.0
            while not engine.model and time.monotonic() < deadline:  # named by the first scrape
                threading.Event().wait(0.05)
            assert engine.model, "no scrape of the simulator's /metrics within 20 s"
            served = httpx.get(f"http://127.0.0.1:{metrics.port}/metrics", timeout=5.0).text
        finally:
            engine.stop()
    samples = parse(served)
    assert {name for name, _ in samples} == {"tokentop_info"}
    ((_, labels),) = samples
    assert dict(labels)["model"] == engine.model and dict(labels)["server"] == sim.url
