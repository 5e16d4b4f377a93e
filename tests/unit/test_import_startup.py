"""What a tokentop process loads before it does useful work: what every command and every engine worker
pays, and CI's few hundred short processes most of all (`tests/perf/startup_cost.py` measures it)."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys

import pytest

from tui.cli import build_parser
from tui.cli.target import target_from_args
from tui.engine import network
from tui.engine.config import TargetConfig
from tui.engine.network import ssl_context, sync_transport, transport_context
from tui.engine.stream.transport import protocol_streams

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def _loaded(code: str, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` are in sys.modules after ``code`` runs in a fresh interpreter."""
    code += f"\nimport json, sys\nprint(json.dumps([n for n in {names!r} if n in sys.modules]))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(out.stdout))


def test_the_tokentop_scripts_import_loads_no_command() -> None:
    """``spawn`` runs the ``tokentop`` script again in every engine worker, and the script's first line is
    ``from tui.cli import main``: that must not load the command layer (~0.15 s of CPU a worker)."""
    assert _loaded("from tui.cli import main", ("tui.cli.dispatch", "tui.configs", "argparse")) == []


def test_a_bench_face_loads_none_of_its_workers_code() -> None:
    """The face starts workers but runs none of their code (event loop, runner, client), and loads
    tokentop's own /metrics server only for --metrics-port."""
    code = (
        "import multiprocessing.context\n"
        "multiprocessing.context.SpawnProcess.start = lambda self: None  # no process: what starting loads\n"
        "import tui.bench.run, tui.cli.dispatch\n"
        "from tui.engine.config import EngineOptions, TargetConfig, WorkloadConfig\n"
        "from tui.engine.host.worker_pool import spawn_worker\n"
        "from tui.engine.wire import WorkerSpec\n"
        "target = TargetConfig('http://127.0.0.1:9/v1')\n"
        "spawn_worker(WorkerSpec(0, 1, target, WorkloadConfig(), 'm', EngineOptions()))\n"
    )
    worker_side = ("asyncio", "tui.engine.load.worker", "tui.engine.load.runner", "tui.engine.stream.client")
    assert _loaded(code, (*worker_side, "tui.engine.telemetry.endpoint")) == []


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)


def test_a_plain_http_target_loads_no_ca_bundle(no_proxy: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No connection to an http URL is TLS (no request follows a redirect), so no process loads a CA
    bundle for one (~25-50 ms of CPU each); the stand-in context trusts nothing, should it ever be used."""

    def no_bundle(*args: object) -> ssl.SSLContext:
        raise AssertionError("a CA bundle was loaded for a plain-http target")

    target = TargetConfig("http://127.0.0.1:9/v1")
    monkeypatch.setattr(network, "_context", no_bundle)
    ctx = transport_context(target)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.cert_store_stats()["x509_ca"] == 0
    sync_transport(target).close()  # the probes' and the scrape's
    protocol_streams(target, target.base_url + "/chat/completions", {})  # a worker's
    assert target_from_args(build_parser().parse_args(["bench", "--url", target.base_url])).base_url


def test_a_tls_capable_connection_gets_the_trust_settings(
    no_proxy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An https URL, the poller's https --metrics-url beside an http target, and an http target through a
    proxy (which may be https) all get the target's `ssl_context`."""
    https = TargetConfig("https://127.0.0.1:9/v1")
    assert transport_context(https) is ssl_context(https)
    http = TargetConfig("http://127.0.0.1:9/v1")
    assert transport_context(http, "https://127.0.0.1:9/metrics") is ssl_context(http)
    monkeypatch.setenv("HTTP_PROXY", "https://127.0.0.1:3128")
    assert transport_context(http) is ssl_context(http)
