"""`tokentop bench` progress end to end: redrawn in place on a terminal (a pty), plain lines off it."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

from tests.support.engine_helpers import bench

pytestmark = pytest.mark.timeout(90)
SIM = ("--sim-time-scale", "20", "--isl", "16", "--osl", "16")


def _bench_on_a_pty(*args: str, columns: int, deadline_s: float = 60.0) -> tuple[int, str, str]:
    """Run bench with stderr on a pseudo-terminal; (status, stdout, what the terminal received)."""
    master, slave = pty.openpty()
    env = dict(os.environ, OPENAI_API_KEY="", COLUMNS=str(columns))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "bench", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env,
    )  # fmt: skip
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + deadline_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed its end
                    break
                if not chunk:
                    break
                received += chunk
            elif proc.poll() is not None:
                break
        assert proc.stdout is not None
        stdout = proc.stdout.read().decode()
        status = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)
    return status, stdout, received.decode("utf-8").replace("\r\n", "\n")


def test_on_a_terminal_one_line_is_redrawn_within_the_width() -> None:
    status, stdout, tty = _bench_on_a_pty("--concurrency", "1,2", "--requests", "6", *SIM, columns=72)
    assert status == 0, tty
    assert "level" in stdout and "c=2" in stdout  # the table still goes to stdout
    assert "\r\x1b[Kprobing http://127.0.0.1:" in tty and "/v1/models…" in tty
    kept = [line.split("\r\x1b[K")[-1] for line in tty.split("\n")]
    assert any(line.startswith("model sim-") for line in kept), kept
    # each finished level leaves one line; everything else was drawn over in place
    assert [line[:13] for line in kept if line.startswith("[")] == ["[1/2] 1 user ", "[2/2] 2 users"]
    draws = [d for d in tty.replace("\n", "\r\x1b[K").split("\r\x1b[K") if d]
    level_draws = [d for d in draws if d.startswith("[")]
    redrawn = [d for d in draws if not d.startswith("session recorded to ")]  # a path is printed whole
    assert len(level_draws) >= 4 and all(len(d) <= 71 for d in redrawn), draws
    assert all("requests" in d and "ETA" in d and "▕" in d for d in level_draws)


def test_off_a_terminal_duration_is_said_in_seconds() -> None:
    r = bench("--rate", "4", "--duration", "1.5", *SIM)
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr and "\x1b" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("starting the built-in simulator")
    assert lines[1].startswith("probing http://127.0.0.1:") and lines[1].endswith("/v1/models…")
    assert lines[2].startswith("model sim-")
    levels = [line for line in lines if line.startswith("[1/1] 4 req/s ")]
    assert len(levels) == 2, lines  # the first draw and the finished level: not every 0.25 s tick
    assert "/1.5 s " in levels[0] and "requests" not in levels[0]
    assert "1.5/1.5 s" in levels[1] and "ETA 0:00" in levels[1] and "run " in levels[1]


def test_the_count_is_of_the_steady_window_as_the_goal_is() -> None:
    """Never "222/8 requests": the count is of requests in the steady window, as the goal is, so it is
    0 while the level warms up (it counted a provisional window: "12/8 requests, warming up", the bar full
    while the level went on); and a fast level is not cut off unsteady by the cap on all its requests before
    its window could be long enough to measure (16 users at 20x ended "warming up" after 1.3 s)."""
    status, _, tty = _bench_on_a_pty("--concurrency", "1,16", "--requests", "2", *SIM, columns=200)
    assert status == 0, tty
    draws = [d for d in tty.replace("\n", "\r\x1b[K").split("\r\x1b[K") if d.startswith("[")]
    assert len(draws) >= 4, draws
    for draw in draws:
        counted = re.search(r"▏ (\d+)(?:/2 requests| requests \(goal 2\)) ", draw)
        assert counted, draw
        if "warming up" in draw or "starting" in draw:
            assert counted.group(1) == "0", draw
        else:
            assert "steady" in draw, draw
    kept = [line.split("\r\x1b[K")[-1] for line in tty.split("\n") if line.split("\r\x1b[K")[-1][:1] == "["]
    assert [line[:8] for line in kept] == ["[1/2] 1 ", "[2/2] 16"], kept
    assert all("· steady, " in line for line in kept), kept
