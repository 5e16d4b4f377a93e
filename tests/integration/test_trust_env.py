"""The environment, honoured as httpx users expect (and ignored with ``--no-trust-env``): the proxy for the
target's scheme, ``NO_PROXY``, and ``SSL_CERT_FILE``; the same decision in the probe and both transports.

No traffic goes anywhere but 127.0.0.1: the proxy is a scripted server on a local port that answers as the
origin would, the target's host is under ``.invalid`` (its lookups are failed in-process, and a proxied
request must not look it up at all), and the certificate is the test's own."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_helpers import tokentop
from tests.support.scripted_server import ScriptedServer
from tests.support.tls_server import (
    HAVE_OPENSSL,
    SelfSigned,
    make_self_signed,
    one_request,
    serve,
    tls_server,
)
from tui.cli import build_parser
from tui.cli.target import target_from_args
from tui.configs import UsageError
from tui.engine.config import TargetConfig
from tui.engine.host.probe import ProbeError, probe_server
from tui.engine.network import ProxyError, bypassed, proxy_for
from tui.engine.stream.transport import TRANSPORTS as ALL_TRANSPORTS
from tui.engine.stream.transport import TransportName

pytestmark = pytest.mark.timeout(30)
TRANSPORTS: list[TransportName] = list(ALL_TRANSPORTS)
UPSTREAM = "http://upstream.invalid:9/v1"
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy or CA variable from the machine running the tests leaks into these."""
    for name in (*PROXY_VARS, *(v.upper() for v in PROXY_VARS), "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def proxy() -> AsyncIterator[ScriptedServer]:
    """A "forward proxy" on 127.0.0.1 that answers every request itself, recording what it was asked."""
    srv = await ScriptedServer(serve).start()
    try:
        yield srv
    finally:
        await srv.close()


def _target(url: str = UPSTREAM, **kw: Any) -> TargetConfig:
    return TargetConfig(**{"base_url": url, "model": "tls-model", "timeout_s": 10, **kw})


# --- which proxy, pure ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "url", "want"),
    [
        ({"HTTP_PROXY": "http://127.0.0.1:3128"}, "http://h:8000/v1", "http://127.0.0.1:3128"),
        ({"HTTP_PROXY": "http://127.0.0.1:3128"}, "https://h/v1", None),
        ({"HTTPS_PROXY": "http://127.0.0.1:3129"}, "https://h/v1", "http://127.0.0.1:3129"),
        ({"https_proxy": "127.0.0.1:3129"}, "https://h/v1", "http://127.0.0.1:3129"),
        ({"ALL_PROXY": "http://127.0.0.1:1"}, "https://h/v1", "http://127.0.0.1:1"),
        ({"HTTP_PROXY": "http://127.0.0.1:1", "NO_PROXY": "h"}, "http://h:8000/v1", None),
        ({"HTTP_PROXY": "http://127.0.0.1:1", "NO_PROXY": ".corp"}, "http://a.b.corp/v1", None),
        ({"HTTP_PROXY": "http://127.0.0.1:1", "NO_PROXY": "*"}, "http://h/v1", None),
        (
            {"HTTP_PROXY": "http://127.0.0.1:1", "NO_PROXY": "notcorp"},
            "http://a.corp/v1",
            "http://127.0.0.1:1",
        ),
    ],
)
def test_the_proxy_is_the_one_httpx_would_use(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str, want: str | None
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    proxy = proxy_for(_target(url))
    assert (None if proxy is None else str(proxy.url).rstrip("/")) == want
    assert proxy_for(_target(url, trust_env=False)) is None


def test_no_proxy_ports_and_ipv6() -> None:
    assert bypassed("h", 8000, "h:8000") and not bypassed("h", 9000, "h:8000")
    assert bypassed("::1", 8000, "::1") and bypassed("127.0.0.1", None, "localhost, 127.0.0.1")
    assert not bypassed("evilcorp.com", None, "corp.com")


def test_a_socks_proxy_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALL_PROXY", "socks5://user:PASS@127.0.0.1:1080")
    with pytest.raises(ProxyError) as info:
        proxy_for(_target())
    assert "socks5:// proxy" in str(info.value) and "PASS" not in str(info.value)
    ns = build_parser().parse_args(["bench", "--url", UPSTREAM])
    with pytest.raises(UsageError, match="--no-trust-env"):
        target_from_args(ns)
    ns = build_parser().parse_args(["bench", "--url", UPSTREAM, "--no-trust-env"])
    assert target_from_args(ns).trust_env is False


def test_flags_reach_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")
    ns = build_parser().parse_args(["bench", "--url", "https://h", "--insecure"])
    target = target_from_args(ns)
    assert (target.insecure, target.ca_cert, target.trust_env) == (True, None, True)
    ns = build_parser().parse_args(["bench", "--url", "https://h", "--insecure", "--ca-cert", "x.pem"])
    with pytest.raises(UsageError, match="contradict"):
        target_from_args(ns)
    demo = target_from_args(build_parser().parse_args(["bench"]), demo_url="http://127.0.0.1:5/v1")
    assert demo.demo and not demo.trust_env  # tokentop's own simulator: never through a proxy


# --- through a local proxy, for real ------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_workers_go_through_the_environments_proxy(
    monkeypatch: pytest.MonkeyPatch, proxy: ScriptedServer, no_dns: list[str], transport: TransportName
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    rec = await one_request(_target(), transport)
    assert rec.status == "ok", rec.error
    assert [r.path for r in proxy.requests] == [UPSTREAM + "/chat/completions"]  # absolute form: a proxy
    assert no_dns == []  # the proxy resolves the target, not us


async def test_the_probe_goes_through_the_same_proxy(
    monkeypatch: pytest.MonkeyPatch, proxy: ScriptedServer, no_dns: list[str]
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    assert await asyncio.to_thread(probe_server, _target(model=None)) == "tls-model"
    assert [r.path for r in proxy.requests] == [UPSTREAM + "/models"]
    assert no_dns == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_no_trust_env_ignores_the_proxy(
    monkeypatch: pytest.MonkeyPatch, proxy: ScriptedServer, no_dns: list[str], transport: TransportName
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    rec = await one_request(_target(trust_env=False), transport)
    assert (rec.error_class, rec.error) == ("connect", "cannot resolve host upstream.invalid")
    assert proxy.requests == [] and no_dns
    with pytest.raises(ProbeError, match=r"cannot resolve host upstream\.invalid"):
        await asyncio.to_thread(probe_server, _target(trust_env=False))


# --- SSL_CERT_FILE ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> SelfSigned:
    if not HAVE_OPENSSL:
        pytest.skip("needs the openssl binary to make a certificate")
    return make_self_signed(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_ssl_cert_file_is_honoured_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch, pair: SelfSigned, transport: TransportName
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(pair.cert))
    server = await tls_server(pair).start()
    try:
        trusted = await one_request(_target(server.url), transport)
        ignored = await one_request(_target(server.url, trust_env=False), transport)
        assert await asyncio.to_thread(probe_server, _target(server.url)) == "tls-model"
    finally:
        await server.close()
    assert trusted.status == "ok", trusted.error
    assert ignored.error_class == "tls", ignored.error


def test_an_unreadable_ssl_cert_file_is_one_usage_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where a connection can be TLS; a plain-http target reads no CA bundle, so a broken one is no error."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    ns = build_parser().parse_args(["bench", "--url", "https://127.0.0.1:9"])
    with pytest.raises(UsageError, match=r"SSL_CERT_FILE=.*missing\.pem.*--no-trust-env"):
        target_from_args(ns)
    ns = build_parser().parse_args(["bench", "--url", "https://127.0.0.1:9", "--no-trust-env"])
    assert target_from_args(ns).trust_env is False
    ns = build_parser().parse_args(["bench", "--url", "http://127.0.0.1:9"])
    assert target_from_args(ns).trust_env is True


def test_bench_refuses_a_socks_proxy_in_one_line() -> None:
    env: dict[str, str | None] = {k: None for k in os.environ if k.lower() in PROXY_VARS}
    env["ALL_PROXY"] = "socks5://127.0.0.1:1"
    r = tokentop("bench", "--url", UPSTREAM, "--requests", "1", timeout_s=30, env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "socks5:// proxy" in r.stderr


def test_a_dead_proxy_is_named_not_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy refuses connections: the error says the proxy could not be reached (and where it came
    from), not that the server could not; its credentials are not shown."""
    import socket

    from tui.engine.host.probe import ProbeError, probe_server

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://user:s3cret@127.0.0.1:{port}")
    with pytest.raises(ProbeError) as info:
        probe_server(_target(UPSTREAM, connect_timeout_s=2.0))
    message = str(info.value)
    assert f"proxy http://127.0.0.1:{port}" in message and "HTTP_PROXY" in message, message
    assert "s3cret" not in message and "--no-trust-env" in message
