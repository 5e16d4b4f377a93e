"""The live app under SIGTERM and SIGHUP, in a real pseudo-terminal: it quits the way `q` does (results
written, the terminal restored), exits 143 / 129, and leaves no engine worker behind."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.pty_app import PtyApp
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_quits_the_app_like_q(tmp_path: Path, sig: signal.Signals, status: int) -> None:
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    with SimServer("flat", time_scale=4.0) as sim:
        env = dict(os.environ, OPENAI_API_KEY="", TERM="xterm-256color", COLUMNS="120", LINES="40")
        args = ["--url", sim.url, "--concurrency", "2", "--osl", "32", "--output", str(out),
                "--requests-log", str(log)]  # fmt: skip
        with PtyApp(args, env) as app:
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline and app.running():
                if log.exists() and log.read_text().count("\n") >= 4:
                    break
                time.sleep(0.05)
            assert log.exists() and log.read_text().count("\n") >= 4, bytes(app.screen[-2000:])
            children = psutil.Process(app.pid).children(recursive=True)
            app.send_signal(sig)
            returncode = app.wait(30)
        screen = app.screen
    assert returncode == status, bytes(screen[-2000:])
    assert json.loads(out.read_text())["totals"]["completed"] >= 4
    assert b"\x1b[?1049l" in bytes(screen[-4000:])  # left the alternate screen: the terminal is restored
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive
