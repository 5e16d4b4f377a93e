"""A certificate that fails in the engine workers stops the load like a rejected key: one line naming the
certificate problem, every worker paused, bench exits 1. The start-up probe normally fails first
(tests/integration/test_tls.py); here it is skipped (the handle given the model) or passed by a stand-in,
as when a server's certificate changes under a running tokentop."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

import pytest

import tui.bench.run as bench
from tests.support.tls_server import HAVE_OPENSSL, SelfSigned, ThreadedTlsServer, make_self_signed
from tui.cli import build_parser
from tui.cli.bench import bench_config
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.control.guard import TLS_FATAL_AFTER, ConfigGuard
from tui.engine.host.handle import EngineHandle
from tui.engine.host.probe import Probed
from tui.engine.records import RequestRecord

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not HAVE_OPENSSL, reason="needs the openssl binary to make a certificate"),
]
NAMED = "TLS: certificate verify failed: self"  # OpenSSL 3 "self-signed certificate", 1.1 "self signed"
HINT = "(use --ca-cert or --insecure)"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> SelfSigned:
    return make_self_signed(tmp_path_factory.mktemp("tls"))


def _record(
    status: Literal["ok", "error"], error_class: str | None = None, error: str | None = None
) -> RequestRecord:
    rec = RequestRecord(1, 0, 0, 1, 0)
    rec.status, rec.error_class, rec.error = status, error_class, error
    return rec


def test_the_guard_trips_on_tls_failures_in_a_row_and_a_success_resets_it() -> None:
    guard = ConfigGuard(has_key=False)
    tls = _record("error", "tls", f"{NAMED}-signed certificate {HINT}")
    assert guard.see([tls] * (TLS_FATAL_AFTER - 1) + [_record("ok")]) is None
    assert guard.see([tls] * (TLS_FATAL_AFTER - 1)) is None  # counted again from the success
    assert guard.see([_record("error", "http_5xx", "HTTP 500")]) is None  # other failures leave the count
    reason = guard.see([tls])
    assert reason == f"load stopped after {TLS_FATAL_AFTER} requests in a row failed: {tls.error}"
    assert guard.see([tls]) is None  # once


def test_the_handle_pauses_every_worker_on_a_certificate_that_fails(pair: SelfSigned) -> None:
    with ThreadedTlsServer(pair) as srv:
        target = TargetConfig(base_url=srv.url, model="tls-model", timeout_s=10)
        handle = EngineHandle(
            target, WorkloadConfig(isl=8, osl=3), LoadTarget(concurrency=4), workers=2, probe=False
        )
        handle.start()
        try:
            assert handle.wait_ready(30.0)
            deadline = time.monotonic() + 20
            while handle.snapshot().fatal is None and time.monotonic() < deadline:
                time.sleep(0.05)
            snap = handle.snapshot()
            assert snap.fatal is not None and NAMED in snap.fatal and snap.fatal.endswith(HINT), snap.fatal
            time.sleep(0.5)  # let the handshakes in flight end
            failed = handle.snapshot().failed
            handle.set_load(LoadTarget(concurrency=8))  # a key press does not resume the load
            time.sleep(1.0)
            after = handle.snapshot()
            assert after.failed == failed, (failed, after.failed)
            assert failed <= 4 * TLS_FATAL_AFTER, failed  # a few per user, not a loop
            assert dict(after.errors) == {"tls": failed}
        finally:
            handle.stop()


def test_bench_stops_with_one_line_naming_the_certificate(
    pair: SelfSigned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ThreadedTlsServer(pair) as srv:
        ns = build_parser().parse_args(
            ["bench", "--url", srv.url, "--concurrency", "2", "--duration", "20", "--quiet",
             "--output", str(tmp_path / "results.json")]
        )  # fmt: skip
        t0 = time.monotonic()
        status = bench.run(bench_config(ns), probe=lambda target: Probed("tls-model"))
        elapsed_s = time.monotonic() - t0
    err = capsys.readouterr().err
    assert status == 1
    assert elapsed_s < 15  # stopped on the certificate, not after the 20 s level
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokentop: error: load stopped after"), err
    assert NAMED in lines[0] and lines[0].endswith(HINT), err
