"""A server that goes away mid-run and comes back on the same port: every request in flight fails
(`disconnect`), the next ones are refused (`connect`), the users back off (a bounded attempt rate, no hot
loop) and the full load is back within a couple of seconds of the server; in the live engine (the handle)
and in `tokentop bench`, which exits 0 with the failures counted."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.engine_helpers import read_jsonl, running_handle, wait_for
from tests.support.ports import free_port, sim_on_port
from tui import units
from tui.engine.config import LoadTarget, WorkloadConfig
from tui.engine.load.backoff import CONNECT_CAP_S

pytestmark = pytest.mark.timeout(120)
USERS = 4
DOWN_S = 3 * CONNECT_CAP_S
"""How long the server stays away (a bounded sleep: the scenario itself): the short steps up to the refusals'
cap take at most 1.55 s (50 ms ... 0.8 s), so every user has reached the cap and is asleep in it when the
server returns, and the no-back-off rate (thousands of refusals) is far above what the cap allows."""
BACK_WITHIN_S = CONNECT_CAP_S + 1.0
"""From the server's return to the full load: one connect back-off step at most, then a request's length."""
GONE = {"connect", "disconnect"}


def _max_attempts(users: int, seconds: float) -> float:
    """What the back-off allows ``users`` in ``seconds`` of refusals: the short first steps (25 ms ... 0.5 s,
    5 of them), then at most one per half cap; without it a refused port is retried thousands of times."""
    return users * (5 + seconds / (CONNECT_CAP_S / 2))


def test_the_live_engine_backs_off_while_the_server_is_gone_and_resumes_at_once(tmp_path: Path) -> None:
    port = free_port()
    sim = sim_on_port(port).start()
    try:
        with running_handle(
            sim.url, LoadTarget(concurrency=USERS), tmp_path, workload=WorkloadConfig(isl=32, osl=32)
        ) as handle:
            wait_for(handle, lambda s: s.completed >= 2 * USERS, 60.0, "completions before the outage")
            sim.stop()  # SIGTERM: the streams in flight break
            _, snap, _ = wait_for(handle, lambda s: s.failed >= USERS, 10.0, "the in-flight requests to fail")
            failed_at = snap.failed
            time.sleep(DOWN_S)
            down = handle.snapshot()
            attempts = down.failed - failed_at
            assert 0 < attempts <= _max_attempts(USERS, DOWN_S), attempts
            assert set(dict(down.errors)) <= GONE and dict(down.errors).get("connect", 0) > 0, down.errors
            completed_at = down.completed

            sim = sim_on_port(port).start()  # the same port: the same URL the engine was given
            _, back, waited_s = wait_for(
                handle,
                lambda s: s.in_flight == USERS and s.completed > completed_at,
                10.0,
                "the full load after the restart",
            )
            assert waited_s <= BACK_WITHIN_S, waited_s
            assert back.fatal is None
    finally:
        sim.stop()
    log = read_jsonl(tmp_path / "requests.jsonl")
    refused = [r for r in log if r["error_class"] == "connect"]
    assert refused and all("refused" in r["error"] for r in refused), refused[:2]


def test_the_open_loop_holds_while_the_server_is_gone_and_keeps_its_schedule_after(tmp_path: Path) -> None:
    rate = 8.0
    port = free_port()
    sim = sim_on_port(port).start()
    load = LoadTarget(mode="rate", rate=rate, arrival="constant")
    try:
        with running_handle(sim.url, load, tmp_path, workload=WorkloadConfig(isl=32, osl=32)) as handle:
            wait_for(handle, lambda s: s.completed >= 4, 60.0, "completions before the outage")
            sim.stop()
            _, snap, _ = wait_for(handle, lambda s: s.failed >= 1, 10.0, "the in-flight requests to fail")
            failed_at = snap.failed
            time.sleep(DOWN_S)
            down = handle.snapshot()
            # the schedule alone: rate x DOWN_S = 24 refused; held by the 1 s connect back-off: 1-2 a second
            assert 0 < down.failed - failed_at <= _max_attempts(1, DOWN_S), down.failed - failed_at
            assert set(dict(down.errors)) <= GONE
            completed_at = down.completed
            sim = sim_on_port(port).start()
            _, _, waited_s = wait_for(handle, lambda s: s.completed > completed_at, 10.0, "a completion")
            assert waited_s <= BACK_WITHIN_S, waited_s
            t0, done0 = time.monotonic(), handle.snapshot().completed
            _, snap, _ = wait_for(handle, lambda s: s.completed >= done0 + 2 * rate, 10.0, "the schedule")
            achieved = (snap.completed - done0) / (time.monotonic() - t0)
            assert achieved >= rate * 0.6, achieved  # held no longer: the scheduled rate again
            assert sum(lv.dropped for lv in snap.levels) >= rate * DOWN_S / 2  # what was due while held
    finally:
        sim.stop()


def test_bench_rides_out_a_restart_says_the_outage_and_keeps_it_out_of_the_level(tmp_path: Path) -> None:
    """Exit 0 with the failures counted; and the outage said when it begins and ends (progress and table),
    saved as a span, the level's rates over the time the server was up and the level not steady, the
    restart seen by the server view, no proxy blamed for the metrics that went away."""
    port = free_port()
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    sim = sim_on_port(port).start()
    bench: subprocess.Popen[str] | None = None
    try:
        cmd = [sys.executable, "-m", "tui", "bench", "--url", sim.url, "--concurrency", str(USERS),
               "--duration", "12", "--osl", "32", "--isl", "32", "--output", str(out), "--requests-log",
               str(log)]  # fmt: skip
        bench = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 40
        while not (
            log.exists() and sum(r["status"] == "ok" for r in read_jsonl(log, live=True)) >= 3 * USERS
        ):
            assert time.monotonic() < deadline and bench.poll() is None, "bench never completed a request"
            time.sleep(0.05)
        down_ns = time.perf_counter_ns()  # the engine stamps on the same clock (CLOCK_MONOTONIC)
        sim.stop()
        time.sleep(DOWN_S)
        up_ns = time.perf_counter_ns()
        sim = sim_on_port(port).start()
        stdout, stderr = bench.communicate(timeout=60)
    finally:
        if bench is not None and bench.poll() is None:
            bench.kill()
            bench.wait()
        sim.stop()
    assert bench.returncode == 0, stderr
    assert "Traceback" not in stderr
    records = read_jsonl(log)
    failed = [r for r in records if r["status"] == "error"]
    assert failed and {r["error_class"] for r in failed} <= GONE, {r["error_class"] for r in failed}
    in_outage = [r for r in failed if down_ns <= r["sent_ns"] < up_ns]
    # one prober a worker: at most about one attempt a second, beside each user's first failure
    assert len(in_outage) <= USERS + 2 * DOWN_S + 5, len(in_outage)
    resumed = sorted(r["sent_ns"] for r in records if r["status"] == "ok" and r["sent_ns"] >= up_ns)
    assert len(resumed) >= 2 * USERS, len(resumed)
    # every user is back: the USERS-th successful request after the restart went out within the bound
    assert (resumed[USERS - 1] - up_ns) / 1e9 <= BACK_WITHIN_S + 1.0, (resumed[USERS - 1] - up_ns) / 1e9
    doc = json.loads(out.read_text())
    assert doc["totals"]["failed"] == len(failed) and doc["totals"]["completed"] > 0
    assert set(doc["totals"]["errors"]) <= GONE
    assert stdout.strip()  # the table was printed
    # the outage, as a span on the run's clock: from the kill to the first answer after the restart
    t0 = doc["clock"]["perf_t0_ns"]
    (outage,) = doc["outages"]
    start_ns, end_ns = t0 + outage["start_s"] * 1e9, t0 + outage["end_s"] * 1e9
    assert down_ns - 0.2e9 <= start_ns <= down_ns + 1.5e9, (start_ns - down_ns) / 1e9
    assert up_ns <= end_ns <= resumed[0] + 2e9, (end_ns - up_ns) / 1e9
    (level,) = doc["levels"]
    assert not level["steady"] and level["server_down_s"] == pytest.approx((end_ns - start_ns) / 1e9, abs=0.6)
    up_s = level["duration"] - level["server_down_s"]
    ended = [r for r in records if r["status"] == "ok" and t0 + level["window_from_s"] * 1e9 <= r["end_ns"]
             < t0 + level["window_to_s"] * 1e9]  # fmt: skip
    assert level["request_throughput"] == pytest.approx(len(ended) / up_s, rel=0.1)
    assert doc["server"]["restarts"] >= 1
    said = f"the server stopped answering at {units.elapsed(outage['start_s'])}"
    assert said in stderr and "the server is back at" in stderr, stderr
    assert "not steady: the server was down" in stdout, stdout
    assert "proxy" not in stdout + stderr
