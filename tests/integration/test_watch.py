"""`tokentop watch`: the server's own signals with no load at all."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import pytest

from tests.pty_app import PtyApp
from tests.support.engine_helpers import logged_lines, tokentop
from tui.cli import build_parser
from tui.cli.watch import watch_config
from tui.configs import UsageError
from tui.engine.config import EngineOptions, TargetConfig
from tui.engine.host.watch_engine import WatchEngine
from tui.engine.results.files import to_json
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
        ([], "no server: give --url or set $OPENAI_BASE_URL"),
        (["--url", "ftp://h"], "must start with http"),
        (["--url", "http://127.0.0.1:9"], "tokentop watch needs a terminal"),
    ],
)
def test_bad_watch_flags_get_one_line_and_exit_2(args: list[str], needle: str) -> None:
    out = tokentop("watch", *args, timeout_s=30, env={"OPENAI_BASE_URL": None})
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr


def _watch_ns(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["watch", *argv])


def test_watch_reads_the_base_url_variable_as_the_load_commands_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """``$OPENAI_BASE_URL`` without ``--url`` is the server (it was "--url is required"), ``--url``
    wins, and a bad or credentialed value is refused in one line naming the variable, not repeating it."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-box:8000")
    assert watch_config(_watch_ns()).target.base_url == "http://gpu-box:8000/v1"
    assert watch_config(_watch_ns("--url", "http://other:9000")).target.base_url == "http://other:9000/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://me:hunter2@gpu-box:8000")
    with pytest.raises(UsageError, match=r"^\$OPENAI_BASE_URL must not carry credentials") as info:
        watch_config(_watch_ns())
    assert "hunter2" not in str(info.value)


def test_watch_runs_against_the_variable_and_says_so_first(tmp_path: Path) -> None:
    """The whole command in a pseudo-terminal with only ``$OPENAI_BASE_URL`` set: its first line names the
    URL (without the credentials it would refuse anyway), and it scrapes that server's /metrics."""
    log = tmp_path / "scrapes.jsonl"
    with SimServer("tiny-cpu", time_scale=4.0) as sim:
        url = sim.start().url
        env = dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL=url, TERM="xterm-256color", COLUMNS="120",
                   LINES="40")  # fmt: skip
        with PtyApp(["watch", "--interval", "0.2", "--server-metrics-log", str(log)], env) as app:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and app.running():
                if logged_lines(log) >= 2:
                    break
                time.sleep(0.05)
            scrapes = logged_lines(log)
            app.write(b"q")
            returncode = app.wait(20)
    text = app.text()
    assert scrapes >= 2, text[-2000:]
    assert text.startswith(f"tokentop: using $OPENAI_BASE_URL={url.removesuffix('/v1')}"), text[:300]
    assert returncode == 0, text[-2000:]


def test_watch_with_a_canary_sends_only_the_canary_and_saves_its_parts(tmp_path: Path) -> None:
    """The canary is the only load watch adds: every request the server saw is a one-token canary, and the
    results say so, with the canary's TTFT over the whole watch and the server's TTFT in parts."""
    truth = tmp_path / "truth.jsonl"
    with SimServer("tiny-cpu", time_scale=4.0, truth_log=truth) as sim:
        engine = WatchEngine(
            TargetConfig(base_url=sim.start().url), EngineOptions(metrics_interval_s=0.2, canary_rate=5.0)
        )
        engine.start()
        try:
            deadline = time.monotonic() + 20
            while (view := engine.server_view()) is None or view.canary is None or view.canary.n < 4:
                assert time.monotonic() < deadline, "no four canaries in 20 s"
                time.sleep(0.05)
            results = to_json(engine.results())
        finally:
            engine.stop()
    seen = [json.loads(line) for line in truth.read_text().splitlines()]
    assert seen and all(
        t["completion_tokens"] == 1 and t["client_request_id"].startswith("9999-") for t in seen
    )
    server = results["server"]
    assert server["load_sent"] == "a canary user only"
    assert server["canary"]["n"] >= 4 and server["canary"]["mean_ms"] > 0
    parts = server["ttft_parts"]
    assert parts["client_ttft_ms"] is None and parts["network_client_ms"] is None  # no users of ours
    assert parts["queue_ms"] is not None and parts["prefill_ms"] is not None
    # the server timed only the canaries here: its whole is theirs, less the way to it and back
    assert 0 < parts["server_ttft_ms"] <= server["canary"]["mean_ms"] * 1.1 + 5
    # what `watch --output` saved as `queue_ms p50 150.0`: every wait is under vLLM's first edge (300 ms)
    assert server["queue_ms"]["p50"] is None and server["queue_ms"]["mean"] < 300
    assert server["queue_ms"]["buckets"]["p50"] == {"kind": "bound", "low": 0.0, "high": 300.0}


def test_a_watch_shows_the_pollers_notices_as_a_run_does(tmp_path: Path) -> None:
    """A server with no /metrics: the poller's one line reaches the snapshot (the errors pane shows the
    notices it carries) as well as the results."""
    with SimServer("tiny-cpu", time_scale=4.0, metrics=False) as sim:
        engine = WatchEngine(TargetConfig(base_url=sim.start().url), EngineOptions(metrics_interval_s=0.2))
        engine.start()
        try:
            deadline = time.monotonic() + 15
            while not (snap := engine.snapshot()).notices:
                assert time.monotonic() < deadline, "no notice in 15 s"
                time.sleep(0.05)
            results = engine.results()
        finally:
            engine.stop()
    assert "/metrics" in snap.notices[0] and snap.notices == results.notices
