"""TLS against a server with a self-signed certificate the test makes itself, on 127.0.0.1: verification is
on by default and the failure says what to do; ``--ca-cert`` and ``--insecure`` both pass. The start-up probe
and a worker's request (on both transports) trust alike: one context
(`tui.engine.network.ssl_context`) for all of them; and `tokentop bench` end to end."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.engine_helpers import tokentop
from tests.support.scripted_server import ScriptedServer
from tests.support.tls_server import (
    HAVE_OPENSSL,
    SelfSigned,
    ThreadedTlsServer,
    make_self_signed,
    one_request,
    tls_server,
)
from tui.engine.config import TargetConfig
from tui.engine.host.probe import ProbeError, probe_server
from tui.engine.network import ssl_context
from tui.engine.stream.transport import TRANSPORTS as ALL_TRANSPORTS
from tui.engine.stream.transport import TransportName

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not HAVE_OPENSSL, reason="needs the openssl binary to make a certificate"),
]
TRANSPORTS: list[TransportName] = list(ALL_TRANSPORTS)
NAMED = "TLS: certificate verify failed: self"  # OpenSSL 3 "self-signed certificate", 1.1 "self signed"
HINT = "(use --ca-cert or --insecure)"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> SelfSigned:
    return make_self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
async def server(pair: SelfSigned) -> AsyncIterator[ScriptedServer]:
    srv = await tls_server(pair).start()
    try:
        yield srv
    finally:
        await srv.close()


def _trusts(pair: SelfSigned) -> dict[str, TargetConfig]:
    return {
        "ca_cert": TargetConfig(base_url="", ca_cert=str(pair.cert)),
        "insecure": TargetConfig("", insecure=True),
    }


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_self_signed_server_fails_by_default_naming_the_certificate(
    server: ScriptedServer, transport: TransportName
) -> None:
    rec = await one_request(TargetConfig(base_url=server.url, model="tls-model", timeout_s=10), transport)
    assert rec.error_class == "tls", rec.error
    assert rec.error is not None and rec.error.startswith(NAMED) and rec.error.endswith(HINT), rec.error


async def test_the_probe_fails_the_same_way(server: ScriptedServer) -> None:
    with pytest.raises(ProbeError) as info:
        await asyncio.to_thread(probe_server, TargetConfig(base_url=server.url, timeout_s=10))
    message = str(info.value)
    assert message.startswith(f"{server.url}: {NAMED}") and message.endswith(HINT), message


@pytest.mark.parametrize("trust", ["ca_cert", "insecure"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_ca_cert_and_insecure_both_pass_probe_and_workers(
    server: ScriptedServer, pair: SelfSigned, transport: TransportName, trust: str
) -> None:
    base = _trusts(pair)[trust]
    target = replace(base, base_url=server.url, timeout_s=10)
    assert await asyncio.to_thread(probe_server, target) == "tls-model"
    rec = await one_request(replace(target, model="tls-model"), transport)
    assert rec.status == "ok", rec.error
    assert len(rec.chunk_ns) == 3


async def test_a_ca_bundle_that_trusts_another_certificate_still_fails(
    server: ScriptedServer, tmp_path: Path
) -> None:
    other = make_self_signed(tmp_path)
    target = TargetConfig(base_url=server.url, model="tls-model", ca_cert=str(other.cert), timeout_s=10)
    rec = await one_request(target, "aiohttp")
    assert rec.error_class == "tls" and rec.error is not None and rec.error.endswith(HINT), rec.error


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    no_proxy: dict[str, str | None] = {k: None for k in os.environ if k.lower().endswith("_proxy")}
    return tokentop("bench", "--requests", "2", "--quiet", *args, timeout_s=45, env=no_proxy)


def test_bench_end_to_end_fails_by_default_and_passes_with_ca_cert(pair: SelfSigned) -> None:
    """Through the real face: the probe, the ISL probe and the engine workers in their own processes."""
    with ThreadedTlsServer(pair) as srv:
        refused = _bench("--url", srv.url)
        trusted = _bench("--url", srv.url, "--ca-cert", str(pair.cert))
    assert refused.returncode == 1, refused.stderr
    assert NAMED in refused.stderr and HINT in refused.stderr, refused.stderr
    assert refused.stderr.count("\n") <= 2, refused.stderr  # one line, no traceback
    assert trusted.returncode == 0, trusted.stderr
    assert "TLS" not in trusted.stderr, trusted.stderr


def test_an_unreadable_ca_cert_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    r = _bench("--url", "https://127.0.0.1:9", "--ca-cert", str(bad))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"tokentop: error: --ca-cert {bad}: not a readable PEM bundle"), r.stderr


async def test_a_ca_bundle_rewritten_in_place_is_read_again(
    server: ScriptedServer, pair: SelfSigned, tmp_path: Path
) -> None:
    """A process keeps one context per trust setting (`ssl_context`), but not past a change to the file."""
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(make_self_signed(tmp_path).cert.read_bytes())
    target = TargetConfig(base_url=server.url, ca_cert=str(bundle), timeout_s=10)
    with pytest.raises(ProbeError):
        await asyncio.to_thread(probe_server, target)
    assert ssl_context(target) is ssl_context(target)  # kept while nothing changed
    bundle.write_bytes(pair.cert.read_bytes() + b"\n")  # the right one, in place (another size)
    assert await asyncio.to_thread(probe_server, target) == "tls-model"
