"""The cache guard against the simulator: its ``POST /reset_prefix_cache`` empties its prefix cache, a server
that refuses gets one line saying how to enable it, `bench --reset-cache-between-levels` starts each level
cold, and the engine's reset (the app's `c`) opens a fresh level. A shared prefix makes every request but
the first hit the cache, so a request that does not (``cached_tokens`` 0) after the first is the reset's."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.engine_helpers import bench, read_jsonl, running_handle, wait_for
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.cache_reset import reset_prefix_cache
from tui.engine.results.files import read_results
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)

PREFIX = 64
"""Shared-prefix tokens: four whole cache blocks, served from the cache to every request after the first."""


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("flat", time_scale=20) as server:
        yield server


@pytest.fixture(scope="module")
def refusing() -> Iterator[SimServer]:
    """A simulator that answers 404 to the reset, as vLLM without VLLM_SERVER_DEV_MODE=1."""
    with SimServer("flat", time_scale=20, extra_args=("--no-cache-reset",)) as server:
        yield server


def _cached(client: httpx.Client, url: str, prompt: str) -> int:
    body = {"model": "sim-flat", "prompt": prompt, "max_tokens": 1, "stream": False}
    usage = client.post(url + "/completions", json=body).json()["usage"]
    return int(usage["prompt_tokens_details"]["cached_tokens"])


def test_the_reset_empties_the_simulators_cache_and_its_counters_show_it(sim: SimServer) -> None:
    prompt = " ".join(f"word{i}" for i in range(80))
    with httpx.Client(timeout=10) as client:
        _cached(client, sim.url, prompt)
        assert _cached(client, sim.url, prompt) >= PREFIX  # warm: the same prompt again
        outcome = reset_prefix_cache(TargetConfig(base_url=sim.url))
        assert outcome.done and "POST /reset_prefix_cache" in outcome.line, outcome
        assert _cached(client, sim.url, prompt) == 0  # cold again
        metrics = client.get(sim.url.removesuffix("/v1") + "/metrics").text
    hits = next(line for line in metrics.splitlines() if line.startswith("vllm:prefix_cache_hits_total"))
    assert float(hits.split()[-1]) >= PREFIX  # the counters go on across the reset, as vLLM's do


def test_a_refused_reset_is_one_line_saying_how_to_enable_it(refusing: SimServer) -> None:
    outcome = reset_prefix_cache(TargetConfig(base_url=refusing.url), "vllm")
    assert not outcome.done
    assert "\n" not in outcome.line
    assert "refused" in outcome.line and "/reset_prefix_cache: 404" in outcome.line
    assert "VLLM_SERVER_DEV_MODE=1" in outcome.line


def test_bench_resets_between_levels_and_says_a_refusal_once(
    sim: SimServer, refusing: SimServer, tmp_path: Path
) -> None:
    """Level 2 starts cold (its first request hits nothing), where without the reset its first request
    would hit the prefix level 1 left; against a server that refuses, --reset-cache is one warning."""
    log = tmp_path / "requests.jsonl"
    common = ("--concurrency", "1,1", "--requests", "3", "--isl", "16", "--osl", "2",
              "--shared-prefix", str(PREFIX), "--no-isl-probe")  # fmt: skip
    out = tmp_path / "results.json"
    r = bench("--url", sim.url, *common, "--reset-cache-between-levels", "--requests-log", str(log),
              "--output", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("prefix cache dropped (POST /reset_prefix_cache)") == 1, r.stderr
    first, second = read_results(out).levels
    assert first.cache_reset is None  # the results say which level started cold, and when it was asked
    assert second.cache_reset is not None and second.cache_reset.done and not second.cache_reset.refused
    assert first.ended_s is not None and second.started_s is not None
    assert first.ended_s <= second.cache_reset.at_s <= second.started_s
    for level in (1, 2):
        records = sorted(
            (x for x in read_jsonl(log) if x["level"] == level), key=lambda x: x["send_start_ns"]
        )
        assert records[0]["cached_tokens"] == 0, (level, records[0])  # cold at its start
        assert all(x["cached_tokens"] >= PREFIX for x in records[1:]), level  # then the prefix hits
    r = bench("--url", refusing.url, *common, "--reset-cache", "--reset-cache-between-levels",
              "--output", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    resets = [lv.cache_reset for lv in read_results(out).levels]  # each level's, asked and refused
    assert all(x is not None and x.refused and not x.done for x in resets), resets
    said = [line for line in r.stdout.splitlines() if "refused to drop its prefix cache" in line]
    assert len(said) == 1 and said[0].startswith("warning: "), r.stdout  # once, though asked three times
    assert "VLLM_SERVER_DEV_MODE=1" in said[0]


def test_the_engines_reset_opens_a_fresh_level_that_starts_cold(sim: SimServer, tmp_path: Path) -> None:
    """What the app's `c` calls: the cache dropped under load, then a new level at the same load."""
    workload = WorkloadConfig(isl=16, osl=2, shared_prefix=PREFIX)
    log = tmp_path / "requests.jsonl"
    with running_handle(sim.url, LoadTarget(concurrency=1), tmp_path, workload=workload) as handle:
        wait_for(handle, lambda snap: snap.completed >= 3, 20, "three requests")
        outcome = handle.reset_cache()
        assert outcome.done, outcome
        assert handle.level_id == 2 and handle.load == LoadTarget(concurrency=1)
        level_two = lambda snap: any(lv.level_id == 2 and lv.completed >= 2 for lv in snap.levels)  # noqa: E731
        wait_for(handle, level_two, 20, "two requests in the fresh level")
    records = sorted(read_jsonl(log), key=lambda x: x["send_start_ns"])
    # every request after the first hits the shared prefix, except the first the reset left cold
    cold = [x for x in records[1:] if x["cached_tokens"] == 0]
    assert len(cold) == 1, [(x["level"], x["cached_tokens"]) for x in records]
    assert json.dumps(handle.snapshot().notices).count("refused") == 0
    levels = {lv.level_id: lv for lv in handle.results().levels}
    reset = levels[2].cache_reset
    assert levels[1].cache_reset is None and reset is not None and reset.done
    assert levels[1].started_s is not None and levels[2].started_s is not None
    assert levels[1].started_s < reset.at_s <= levels[2].started_s


class _SlotsWithoutSavePath(http.server.BaseHTTPRequestHandler):
    """llama.cpp's `llama-server` without ``--slot-save-path``: lists its slots, answers 501 to any action."""

    def do_GET(self) -> None:
        self._answer(200, [{"id": 0, "is_processing": False}, {"id": 1, "is_processing": False}])

    def do_POST(self) -> None:
        message = "This server does not support slots action. Start it with `--slot-save-path`"
        self._answer(501, {"error": {"code": 501, "message": message, "type": "not_supported_error"}})

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


def test_llamacpp_without_a_slot_save_path_is_a_refusal_saying_how_to_enable_it() -> None:
    """Found against the real llama-server: a slot erase answers 501 unless it was started with
    --slot-save-path; that is a refusal with the way to enable it, not a failed reset."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlotsWithoutSavePath)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        outcome = reset_prefix_cache(TargetConfig(base_url=url), "llamacpp")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert not outcome.done and "\n" not in outcome.line
    assert "refused" in outcome.line and "/slots: 501" in outcome.line
    assert "--slot-save-path" in outcome.line
