"""Servers that reject or fail every request: bench stops on a wrong key at once, backs off on 429 and 5xx
(no hot loop), and says why nothing completed. The app's engine (the handle) stops every worker too."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.engine_helpers import bench
from tests.support.fault_server import FaultServer
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle

pytestmark = pytest.mark.timeout(90)
SECRET = "sk-faults-" + "k3y" * 60  # ~190 characters: a prefix of it must not leak either


@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_key_stops_every_worker_at_once(status: int) -> None:
    with FaultServer(status) as server:
        t0 = time.monotonic()
        r = bench("--url", server.url, "--api-key", SECRET, "--concurrency", "8", "--workers", "2",
                   "--duration", "60", "--quiet")  # fmt: skip
        elapsed_s = time.monotonic() - t0
        hits = server.hits
        time.sleep(0.5)
        assert server.hits == hits  # nothing after the exit
    assert r.returncode == 1, r.stderr
    assert elapsed_s < 30  # stopped on the key, not after the 60 s level (start-up is slow on a busy machine)
    assert hits <= 60, hits  # a few per user, not hundreds per second
    assert "the API key was rejected" in r.stderr and f"HTTP {status}" in r.stderr
    assert r.stderr.count("tokentop: error:") == 1, r.stderr
    assert SECRET[:12] not in r.stdout + r.stderr


def test_the_handle_pauses_all_workers_on_a_rejected_key() -> None:
    """The live app's engine: the fatal condition stops the load itself (the app only shows the banner)."""
    with FaultServer(401) as server:
        target = TargetConfig(base_url=server.url, api_key=SECRET)
        handle = EngineHandle(target, WorkloadConfig(isl=8, osl=8), LoadTarget(concurrency=8), workers=2)
        handle.start()
        try:
            deadline = time.monotonic() + 15
            while handle.snapshot().fatal is None and time.monotonic() < deadline:
                time.sleep(0.05)
            fatal = handle.snapshot().fatal
            assert fatal is not None and "API key was rejected" in fatal and SECRET[:12] not in fatal
            time.sleep(0.3)  # let requests already in flight end
            hits = server.hits
            handle.set_load(LoadTarget(concurrency=16))  # a key press does not resume the load either
            time.sleep(1.0)
            assert server.hits == hits, (hits, server.hits)
            assert hits <= 60
        finally:
            handle.stop()


def test_429_with_retry_after_is_honoured_per_user() -> None:
    users, duration_s = 4, 3
    with FaultServer(429, headers={"retry-after": "1"}) as server:
        r = bench("--url", server.url, "--concurrency", str(users), "--duration", str(duration_s), "--quiet")
        hits = server.hits
    # each user: one request, then one a second: about users x (duration + 1), not hundreds per second
    assert hits <= users * (duration_s + 2), hits
    assert r.returncode == 1
    assert "no request completed" in r.stderr and "http_429" in r.stderr


def test_5xx_backs_off_per_user() -> None:
    users, duration_s = 4, 3
    with FaultServer(500) as server:
        r = bench("--url", server.url, "--concurrency", str(users), "--duration", str(duration_s), "--quiet")
        hits = server.hits
    # exponential from 50 ms, capped: about 8 requests per user in 3 s (without it: thousands)
    assert hits <= users * 15, hits
    assert r.returncode == 1 and "http_5xx" in r.stderr


def test_a_long_key_echoed_by_the_server_leaks_nowhere(tmp_path: Path) -> None:
    """The server repeats the key in its error (as OpenAI's does): not in stdout, stderr, results or log, not
    even the first dozen characters of it, though the message is cut to one line."""
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {SECRET}. See the docs."}}).encode()
    with FaultServer(400, body=echo) as server:
        r = bench("--url", server.url, "--api-key", SECRET, "--concurrency", "2", "--duration", "1",
                   "--output", str(out), "--requests-log", str(log), "--quiet")  # fmt: skip
        assert server.auth_seen and all(a == f"Bearer {SECRET}" for a in server.auth_seen)  # it was sent
    texts = {"stdout": r.stdout, "stderr": r.stderr, "results": out.read_text(), "log": log.read_text()}
    assert "Incorrect API key provided: ***" in texts["log"]
    for name, text in texts.items():
        assert SECRET[:12] not in text, name


def test_credentials_in_the_url_are_refused_in_one_line() -> None:
    with FaultServer(200) as server:
        url = server.url.replace("http://", "http://alice:hunter2-PASS@")
        r = bench("--url", url, "--requests", "2")
        assert server.hits == 0
    assert r.returncode == 2
    assert (
        r.stderr.startswith("tokentop: error: --url must not carry credentials") and r.stderr.count("\n") == 1
    )
    assert "hunter2" not in r.stderr + r.stdout
