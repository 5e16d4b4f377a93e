"""vLLM stopped and started again under a bench: the requests cut are counted and classed, the counters'
reset is seen (no negative rate), and the run goes on when the server is back. It takes minutes (vLLM
starts in 40 s to several minutes on 2 shared cores), so it runs only with ``TOKENTOP_REAL_RESTART=1``, with
vLLM up from ``vllm_start.sh`` (the test restarts it with the environment it runs in: give it the same
``EXTRA_ARGS`` and ``VLLM_SERVER_DEV_MODE`` the server was started with)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.engine_helpers import read_jsonl
from tests.support.real_servers import Server

pytestmark = pytest.mark.timeout(1200)

ROOT = Path(__file__).resolve().parents[2]


def _scripts() -> Path:
    """`../shared/realserver` beside the repository (or its worktree folder), or TOKENTOP_REALSERVER_DIR."""
    given = os.environ.get("TOKENTOP_REALSERVER_DIR")
    candidates = [Path(given)] if given else [p / "shared" / "realserver" for p in ROOT.parents[:2]]
    for folder in candidates:
        if (folder / "vllm_start.sh").is_file():
            return folder
    pytest.skip("no vllm_start.sh found: set TOKENTOP_REALSERVER_DIR to ../shared/realserver")


def _ok_after(log: Path, t_ns: int) -> int:
    return sum(1 for x in read_jsonl(log, live=True) if x["status"] == "ok" and x["send_start_ns"] > t_ns)


def _wait(what: str, cond: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out after {timeout_s:g} s waiting for {what}"
        time.sleep(0.5)


@pytest.mark.skipif(
    not os.environ.get("TOKENTOP_REAL_RESTART"), reason="minutes long: TOKENTOP_REAL_RESTART=1"
)
def test_a_restart_under_load_is_counted_classed_and_survived(vllm: Server, tmp_path: Path) -> None:
    scripts = _scripts()
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    env = dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL="")
    bench = subprocess.Popen(
        [sys.executable, "-m", "tui", "bench", "--url", vllm.url, "--concurrency", "4", "--duration", "900",
         "--isl", "32", "--osl", "24", "--output", str(out), "--requests-log", str(log)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        _wait("requests before the stop", lambda: log.exists() and _ok_after(log, 0) >= 4, 300)
        subprocess.run(["bash", str(scripts / "vllm_stop.sh")], check=True, timeout=60)
        stopped_ns = time.perf_counter_ns()
        subprocess.run(["bash", str(scripts / "vllm_start.sh")], check=True, timeout=900, env=os.environ)
        _wait("requests after the start", lambda: _ok_after(log, stopped_ns) >= 4, 300)
    finally:
        bench.send_signal(signal.SIGINT)  # it writes what it measured
        stdout, stderr = bench.communicate(timeout=120)
    assert bench.returncode == 130, stderr
    records = read_jsonl(log)
    cut = [x for x in records if x["status"] == "error"]  # not those the SIGINT cancelled
    assert cut, "no request was cut by the stop"
    classes = {x["error_class"] for x in cut}  # refused while down, 503 while starting, cut mid-stream
    assert classes <= {"disconnect", "connect", "http_5xx", "stream_error"}, classes
    results = json.loads(out.read_text())
    (outage, *_) = results["outages"]
    assert outage["end_s"] is not None, outage  # the server came back
    assert "the server stopped answering" in stderr and "the server is back" in stderr, stderr
    (level,) = results["levels"]
    server = level["server"]
    assert server["restarts"] >= 1, server  # the counters went back to 0 and that was seen
    for rate in ("generation_tok_s", "prompt_tok_s"):
        assert server[rate] is None or server[rate] >= 0, server  # no negative rate across the reset
    assert "errors over the whole run" in stdout
