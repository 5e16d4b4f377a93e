"""`tokentop watch`: the server's own signals with no load at all."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tui.engine.config import EngineOptions, TargetConfig
from tui.engine.host.watch import WatchEngine
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(60)


def test_watching_sends_no_request_and_reads_the_server(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    log = tmp_path / "server.jsonl"
    with SimServer("tiny-cpu", time_scale=4.0, truth_log=truth) as sim:
        engine = WatchEngine(
            TargetConfig(base_url=sim.start().url),
            EngineOptions(metrics_interval_s=0.2, server_metrics_log=str(log)),
        )
        engine.start()
        try:
            deadline = time.monotonic() + 15
            while (view := engine.server_view()) is None or view.scrapes < 3:
                assert time.monotonic() < deadline, "no three scrapes in 15 s"
                time.sleep(0.05)
            snap = engine.snapshot()
            engine.write_results(tmp_path / "results.json")
        finally:
            engine.stop()
    assert view.status == "ok" and view.kind == "vllm" and view.current["running"] == 0
    assert snap.in_flight == 0 and snap.completed == 0 and snap.model == view.model
    assert not truth.exists() or truth.read_text() == ""  # the server saw no generation request
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["mode"] == "watch" and results["server"]["kind"] == "vllm"
    assert results["server"]["running_mean"] == 0
    assert len(log.read_text().splitlines()) >= 3 and engine.stopped


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([], "the following arguments are required: --url"),
        (["--url", "ftp://h"], "must start with http"),
        (["--url", "http://127.0.0.1:9"], "tokentop watch needs a terminal"),
    ],
)
def test_bad_watch_flags_get_one_line_and_exit_2(args: list[str], needle: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tui", "watch", *args],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
