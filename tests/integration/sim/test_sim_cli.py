"""`tokentop sim` as a process: exit codes, one-line errors, signals, and what it may import."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import pytest

from tui.sim.launch import SimServer
from tui.sim.perf_model import PROFILES

SIM = [sys.executable, "-m", "tui", "sim"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SIM, *args], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)


def test_list_profiles_prints_one_line_each() -> None:
    result = _run("--list-profiles")
    assert result.returncode == 0
    lines = result.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(PROFILES)


@pytest.mark.parametrize(
    "args",
    [
        ["--profile", "nope"],
        ["--fault", "bogus=0.1"],
        ["--fault", "stall=2"],
        ["--fault", "error500=0.7", "--fault", "error429=0.7"],
        ["--reasoning-tokens", "-1"],
        ["--max-seqs", "300", "--prefill-chunk", "256"],
    ],
)
def test_bad_flags_exit_2_with_one_line(args: list[str]) -> None:
    result = _run("--port", "0", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "error" in result.stderr


def test_port_in_use_exits_1_with_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = _run("--port", str(taken.getsockname()[1]))
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert "address already in use" in line


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly_and_logs_what_was_in_flight(tmp_path: Path, sig: signal.Signals) -> None:
    truth = tmp_path / "truth.jsonl"
    sim = SimServer("small-gpu", truth_log=truth).start()
    try:
        assert sim.process is not None
        process = sim.process
        body = orjson.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5000,
                             "ignore_eos": True, "stream": True})  # fmt: skip
        request = urllib.request.Request(sim.url + "/chat/completions", data=body, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.readline()  # the stream is running
            process.send_signal(sig)
            assert process.wait(timeout=10) == 0
    finally:
        sim.stop()
    (record,) = [orjson.loads(line) for line in truth.read_bytes().splitlines()]
    assert record["status"] == "disconnected" and record["completion_tokens"] > 0


def _cached_tokens(url: str, prompt: str) -> int:
    body = orjson.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": 1})
    request = urllib.request.Request(url + "/chat/completions", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        usage = orjson.loads(response.read())["usage"]
    return int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)


@pytest.mark.parametrize("cache", [True, False])
def test_tokentop_sim_takes_no_prefix_cache(cache: bool) -> None:
    sim = SimServer("flat", time_scale=20, extra_args=() if cache else ("--no-prefix-cache",))
    sim.args = [*SIM, *sim.args[3:]]  # `tokentop sim`, not `python -m tui.sim`: the same flags
    prompt = " ".join(["word"] * 100)
    with sim:
        url = sim.start().url
        _cached_tokens(url, prompt)
        cached = _cached_tokens(url, prompt)  # the same prompt again: whole 16-token blocks are held
    assert (cached >= 96) if cache else (cached == 0), cached


def test_sim_imports_no_ui_and_no_engine() -> None:
    code = (
        "import sys, tui.sim.server, tui.sim.launch, tui.sim.perf_model; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'plotext') "
        "or m.startswith(('tui.engine', 'tui.app'))]; print(bad)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr
