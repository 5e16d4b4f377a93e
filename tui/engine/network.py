"""How every connection to the target is trusted and routed: one TLS context and one proxy decision, built
from the `TargetConfig` alone, so the face's start-up probe and each engine worker (on either transport)
trust and route alike.

An `ssl.SSLContext` cannot cross a process boundary, so each process builds its own from the same fields
with `ssl_context`; the environment the proxy is read from is the face's, inherited by its workers.
"""

from __future__ import annotations

import functools
import os
import ssl
import urllib.request
from urllib.parse import urlsplit

import httpx

from tui.engine.config import TargetConfig

PROXY_SCHEMES = ("http", "https")
"""Proxies both transports can speak (aiohttp has no SOCKS)."""


class ProxyError(ValueError):
    """A proxy from the environment that tokentop cannot use; the message is one line, without credentials."""


def ssl_context(target: TargetConfig) -> ssl.SSLContext:
    """The trust settings of every connection to ``target``.

    Verification is on by default, against what httpx verifies against (``SSL_CERT_FILE`` or
    ``SSL_CERT_DIR`` when `TargetConfig.trust_env`, else certifi's bundle); ``ca_cert`` replaces that store
    with a PEM bundle (as httpx's ``verify=PATH`` and curl's ``--cacert`` do); ``insecure`` verifies nothing.
    Raises `OSError`/`ssl.SSLError` for a ``ca_cert`` that cannot be read as PEM.

    One context per process for the same settings: loading a CA bundle costs ~25 ms of CPU, and the face
    alone asked for three (the probe, the ISL probe, the metrics poller). A changed environment variable or
    ``ca_cert`` file makes a new one."""
    env = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")) if target.trust_env else None
    return _context(target.insecure, target.ca_cert, target.trust_env, env, _file_version(target.ca_cert))


def transport_context(target: TargetConfig, url: str | None = None) -> ssl.SSLContext:
    """The TLS context of a transport to ``url`` (the target's by default): `ssl_context` where a connection
    can be TLS (an https URL, or any proxy), else one that trusts nothing.

    No request here follows a redirect, so a plain-http transport without a proxy never makes a TLS
    connection. Loading the CA bundle for it anyway cost every face and worker ~25-50 ms of CPU; the
    stand-in loads nothing and, if it were ever used, would refuse every server rather than trust one."""
    if tls_possible(target, url):
        return ssl_context(target)
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def tls_possible(target: TargetConfig, url: str | None = None) -> bool:
    """A connection to ``url`` (the target's by default) can be TLS: an https URL, or a proxy (one that
    cannot be used counts: `proxy_for` says why where it is used)."""
    if urlsplit(url or target.base_url).scheme.lower() == "https":
        return True
    try:
        return proxy_for(target) is not None
    except ProxyError:
        return True


def _file_version(path: str | None) -> tuple[int, int] | None:
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None  # reading it fails with its own error
    return None if st is None else (st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _context(
    insecure: bool,
    ca_cert: str | None,
    trust_env: bool,
    env: tuple[str | None, str | None] | None,
    file_version: tuple[int, int] | None,
) -> ssl.SSLContext:
    """The context for these settings (``env`` and ``file_version`` only key the cache)."""
    if insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if ca_cert:
        return ssl.create_default_context(cafile=ca_cert)
    return httpx.create_ssl_context(verify=True, trust_env=trust_env)


def proxy_for(target: TargetConfig) -> httpx.Proxy | None:
    """The proxy the environment names for the target's URL (``HTTPS_PROXY`` for https, ``HTTP_PROXY`` for
    http, else ``ALL_PROXY``; none when ``NO_PROXY`` covers the host), or None; always None without
    `TargetConfig.trust_env`. Decided once per client: every request goes to the one base URL.

    Raises `ProxyError` for a proxy neither transport speaks (SOCKS)."""
    if not target.trust_env:
        return None
    proxies = urllib.request.getproxies_environment()
    parts = urlsplit(target.base_url)
    url = proxies.get(parts.scheme) or proxies.get("all")
    if not url:
        return None
    if bypassed(parts.hostname or "", parts.port, proxies.get("no", "")):
        return None
    if "://" not in url:
        url = "http://" + url  # HTTP_PROXY=host:3128, as curl and httpx take it
    scheme = urlsplit(url).scheme.lower()
    if scheme not in PROXY_SCHEMES:
        raise ProxyError(
            f"the environment's proxy for {parts.scheme} is a {scheme}:// proxy, which tokentop cannot use "
            "(http:// or https:// only); unset it or give --no-trust-env"
        )
    return httpx.Proxy(url)


def proxy_named(target: TargetConfig) -> str | None:
    """The proxy the target's connections go through, for an error line: "the proxy URL ($HTTP_PROXY)"
    without its credentials; None when they go direct."""
    try:
        proxy = proxy_for(target)
    except ProxyError:
        return None
    if proxy is None:
        return None
    scheme = urlsplit(target.base_url).scheme
    var = f"{scheme.upper()}_PROXY" if urllib.request.getproxies_environment().get(scheme) else "ALL_PROXY"
    url = proxy.url
    return f"the proxy {url.scheme}://{url.host}{f':{url.port}' if url.port else ''} (${var})"


def bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """``NO_PROXY`` covers ``host``: ``*``, the host itself, or a domain it is under (``example.com`` and
    ``.example.com`` both cover ``api.example.com``), optionally with a port (``host:8000``)."""
    host = host.lower().strip("[]")
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and (not entry_port.isdigit() or int(entry_port) != port):
            continue
        name = name.removeprefix("*").removeprefix(".").strip("[]")
        if host == name or host.endswith("." + name):
            return True
    return False


def sync_client(target: TargetConfig, timeout: httpx.Timeout) -> httpx.Client:
    """A blocking client for the face's one-off requests to the target (the start-up probe, the ISL probe),
    trusting and routing as the workers do."""
    # trust_env=False: the environment was read once, in sync_transport (httpx 0.27 would read .netrc too)
    return httpx.Client(transport=sync_transport(target), timeout=timeout, trust_env=False)


def sync_transport(target: TargetConfig, url: str | None = None) -> httpx.HTTPTransport:
    """A blocking transport to the target that trusts and routes as the workers do (also for a client that
    sets its own headers, such as the server-metrics poller's ``transport=``); ``url``: where it goes, when
    not to the target's base URL (the poller's ``--metrics-url``)."""
    return httpx.HTTPTransport(verify=transport_context(target, url), proxy=proxy_for(target), retries=0)
