"""The built-in simulator never outlives the process that started it, however that process ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

pytestmark = pytest.mark.timeout(60)

PARENT = """
import sys, time
from tui.sim.launch import SimServer
sim = SimServer("flat").start()
print(sim.process.pid, flush=True)
time.sleep(60)
"""


def test_the_simulator_goes_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        sim_pid = int(parent.stdout.readline())
        sim = psutil.Process(sim_pid)
        assert sim.is_running()
        os.kill(parent.pid, signal.SIGKILL)  # no clean-up of any kind runs in the parent
        parent.wait(10)
        deadline = time.monotonic() + 10
        while sim.is_running() and sim.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the simulator outlived its parent by 10 s"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_tokentop_sim_alone_does_not_stop_at_end_of_input() -> None:
    """Without --exit-with-parent, a closed stdin (a script, CI) must not stop the simulator."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "sim", "--port", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert "serving profile" in proc.stdout.readline()
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(1.0)  # still serving a second after its stdin was at end of file
    finally:
        proc.terminate()
        proc.wait(10)
