"""The live app under SIGTERM and SIGHUP, in a real pseudo-terminal: it quits the way `q` does (results
written, the terminal restored), exits 143 / 129, and leaves no engine worker behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_quits_the_app_like_q(tmp_path: Path, sig: signal.Signals, status: int) -> None:
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    master, slave = os.openpty()
    screen = bytearray()

    def drain() -> None:  # the app blocks if nobody reads its terminal
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            screen.extend(data)

    with SimServer("flat", time_scale=4.0) as sim:
        env = dict(os.environ, OPENAI_API_KEY="", TERM="xterm-256color", COLUMNS="120", LINES="40")
        cmd = [sys.executable, "-m", "tui", "--url", sim.url, "--concurrency", "2", "--osl", "32",
               "--output", str(out), "--requests-log", str(log)]  # fmt: skip
        proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline and proc.poll() is None:
                if log.exists() and log.read_text().count("\n") >= 4:
                    break
                time.sleep(0.05)
            assert log.exists() and log.read_text().count("\n") >= 4, bytes(screen[-2000:])
            children = psutil.Process(proc.pid).children(recursive=True)
            proc.send_signal(sig)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(master)
            reader.join(5)
    assert proc.returncode == status, bytes(screen[-2000:])
    assert json.loads(out.read_text())["totals"]["completed"] >= 4
    assert b"\x1b[?1049l" in bytes(screen[-4000:])  # left the alternate screen: the terminal is restored
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive
