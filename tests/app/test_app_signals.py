"""The live app under SIGTERM and SIGHUP, in a real pseudo-terminal: it quits the way `q` does (results
written, the terminal restored), exits 143 / 129, and leaves no engine worker behind."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.pty_app import PtyApp
from tests.support.engine_helpers import logged_lines
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    """One simulator for both signals' apps (each app's run is its own; the server keeps no state between)."""
    with SimServer("flat", time_scale=4.0) as server:
        yield server


def _app_against(url: str, out: Path, log: Path) -> tuple[list[str], dict[str, str]]:
    """The live app's flags (2 users against ``url``, results and requests log written) and its
    environment (a 120x40 terminal, no API key)."""
    env = dict(os.environ, OPENAI_API_KEY="", TERM="xterm-256color", COLUMNS="120", LINES="40")
    args = ["--url", url, "--concurrency", "2", "--osl", "32", "--output", str(out),
            "--requests-log", str(log)]  # fmt: skip
    return args, env


def _until_four_logged(app: PtyApp, log: Path) -> None:
    """Wait (40 s at most) until the app has logged four finished requests: it runs and has measured."""
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and app.running() and logged_lines(log) < 4:
        time.sleep(0.05)
    assert logged_lines(log) >= 4, bytes(app.screen[-2000:])


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_quits_the_app_like_q(
    tmp_path: Path, sim: SimServer, sig: signal.Signals, status: int
) -> None:
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    with PtyApp(*_app_against(sim.url, out, log)) as app:
        _until_four_logged(app, log)
        children = psutil.Process(app.pid).children(recursive=True)
        app.send_signal(sig)
        returncode = app.wait(30)
    screen = app.screen
    assert returncode == status, bytes(screen[-2000:])
    assert json.loads(out.read_text())["totals"]["completed"] >= 4
    assert b"\x1b[?1049l" in bytes(screen[-4000:])  # left the alternate screen: the terminal is restored
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive


# `timing`: the 2 s bound is where a worker that had to be killed (2 s of join first) lands. In CI's
# first pass at -n 6, with one more core kept busy, one exit took 3.1 s; on its own with that busy core it
# passed 10 runs of 10.
@pytest.mark.timing
def test_closing_the_terminal_ends_the_app_within_2_s(tmp_path: Path) -> None:
    """The pty's master really closed (an ssh drop, ``tmux kill-session``): the kernel's SIGHUP, a terminal
    that fails every write. The app writes its results, exits 129 and leaves no process behind."""
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    with SimServer("flat", time_scale=4.0) as sim:
        with PtyApp(*_app_against(sim.url, out, log)) as app:
            _until_four_logged(app, log)
            children = psutil.Process(app.pid).children(recursive=True)
            assert children  # the engine's workers
            app.hang_up()
            closed = time.monotonic()
            try:
                returncode = app.wait(10)
            except Exception:
                returncode = None
            took_s = time.monotonic() - closed
        _, alive = psutil.wait_procs(children, timeout=2)
    # a child that ended after the app did is a zombie until init reaps it: ended, not left behind
    alive = [p for p in alive if _running(p)]
    assert returncode == 129
    assert took_s < 2.0, f"{took_s:.1f} s from the hang-up to the exit"
    assert not alive, alive
    results = json.loads(out.read_text())
    assert results["interrupted_by"] == "SIGHUP"
    assert results["totals"]["completed"] >= 4


def _running(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
