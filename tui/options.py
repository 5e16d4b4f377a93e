"""Flags to the engine's frozen configs: the target (URL, key, headers, trust), the engine options and the
load levels; the workload's flags are `tui.workload_options`, and each face's one config is built from
these by `tui.face_options`.

Nothing here imports `tui.cli`: the entry point imports the faces, so a face importing it back would close
a circle (harlequin's ``hsql/cli.py`` takes its options from ``harlequin.config`` for the same reason).
`tui.cli` defines the flags; these turn the parsed `argparse.Namespace` into `tui.engine.config` values
and report an unusable value as a `UsageError`.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from tui.demo import DemoConfig
from tui.engine.config import (
    Endpoint,
    EngineOptions,
    LoadTarget,
    RayPlacement,
    TargetConfig,
    normalise_base_url,
)
from tui.engine.redact import display_url

BASE_URL_ENV = "OPENAI_BASE_URL"
"""The OpenAI SDK's variable for the server's base URL: honoured when ``--url`` is not given."""

DEMO_CONCURRENCY = 4
"""The demo starts at 4 users so every pane has something to show at once; a real target starts at 1."""


class UsageError(Exception):
    """A flag value that parsed but cannot be used; reported in one line, exit status 2."""


def url_from_args(ns: argparse.Namespace) -> str | None:
    """``--url``, else ``$OPENAI_BASE_URL`` (as the OpenAI SDK reads it; empty counts as unset), else None:
    the demo. A user with the variable set for their other tools would otherwise get the simulator."""
    if ns.url is not None:
        return str(ns.url)
    return os.environ.get(BASE_URL_ENV, "").strip() or None


def url_note(ns: argparse.Namespace) -> str | None:
    """One line saying the target came from the environment, or that a URL without a scheme was taken as
    http:// (never its credentials), or None."""
    url = url_from_args(ns)
    if url is not None and "://" not in url.strip():
        return f"taking {_url_flag(ns)} {display_url(url.strip())} as {display_url(with_scheme(url))}"
    if ns.url is not None or url is None:
        return None
    return f"using ${BASE_URL_ENV}={display_url(url)}"


def with_scheme(url: str) -> str:
    """``url`` with ``http://`` in front when it names no scheme (``localhost:8000``), else as given."""
    url = url.strip()
    return url if "://" in url else f"http://{url}"


def _url_flag(ns: argparse.Namespace) -> str:
    return "--url" if ns.url is not None else f"${BASE_URL_ENV}"


def demo_from_args(ns: argparse.Namespace, *, time_scale: float = 1.0) -> DemoConfig | None:
    """The built-in simulator to start, or None when there is a target (``--url`` or ``$OPENAI_BASE_URL``).
    ``time_scale``: bench's ``--sim-time-scale`` (the live app runs the demo in real time)."""
    if url_from_args(ns) is not None:
        return None
    if endpoint_from_args(ns)[1] is not None:
        raise UsageError("--endpoint /PATH needs --url: the built-in simulator serves its API under /v1 only")
    return DemoConfig(profile=ns.sim_profile, seed=ns.seed, time_scale=time_scale)


def endpoint_from_args(ns: argparse.Namespace) -> tuple[Endpoint, str | None]:
    """The API flavour and the request path (None: the flavour's standard one under ``/v1``) from
    ``--endpoint chat|completions|/PATH`` and ``--endpoint-type``."""
    value = getattr(ns, "endpoint", "chat") or "chat"
    kind = getattr(ns, "endpoint_type", None)
    if value.startswith("/"):
        return ("completions" if kind == "completions" else "chat"), value
    if kind is not None and kind != value:
        raise UsageError(f"--endpoint {value} and --endpoint-type {kind} contradict each other: give one")
    return ("completions" if value == "completions" else "chat"), None


def base_url_from_args(ns: argparse.Namespace, *, demo_url: str | None = None, add_v1: bool = True) -> str:
    """The server's base URL, normalised, from ``--url``, else ``$OPENAI_BASE_URL``, else ``demo_url``: every
    face resolves it here, so ``tokentop watch`` reads the variable as the load commands do. A bad value is
    a `UsageError` naming where it came from, and credentials in it are refused without being repeated."""
    given = url_from_args(ns)
    url = given or demo_url
    if url is None:
        raise UsageError(f"no server: give --url or set ${BASE_URL_ENV}")
    _refuse_credentials(url, _url_flag(ns))
    try:
        return normalise_base_url(with_scheme(url), add_v1=add_v1)
    except ValueError as exc:
        from_env = ns.url is None and given is not None
        raise UsageError(f"${BASE_URL_ENV}: {exc}" if from_env else str(exc)) from None


def target_from_args(ns: argparse.Namespace, *, demo_url: str | None = None) -> TargetConfig:
    """Build the target; `demo_url` is the simulator's URL when tokentop started it itself."""
    given = url_from_args(ns)
    endpoint, path = endpoint_from_args(ns)
    base_url = base_url_from_args(ns, demo_url=demo_url, add_v1=path is None)
    headers: list[tuple[str, str]] = []
    for item in ns.header:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header wants NAME:VALUE, got {item!r}")
        headers.append((name.strip(), value.strip()))
    extra: tuple[tuple[str, object], ...] = ()
    if ns.extra_body:
        try:
            body = json.loads(ns.extra_body)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--extra-body is not valid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(body, dict):
            raise UsageError("--extra-body must be a JSON object")
        extra = tuple(body.items())
    api_key = api_key_from_args(ns)
    target = TargetConfig(
        base_url=base_url,
        model=ns.model,
        endpoint=endpoint,
        endpoint_path=path,
        api_key=api_key,
        headers=tuple(headers),
        extra_body=extra,
        timeout_s=ns.timeout,
        demo=given is None,
    )
    return _with_trust(ns, target)


def api_key_from_args(ns: argparse.Namespace) -> str | None:
    """``--api-key``, else the file ``--api-key-file`` names (read once, stripped), else ``$OPENAI_API_KEY``.
    The file and the variable keep the key out of the process list, which every user can read."""
    if key := getattr(ns, "api_key", None):
        return str(key)
    if (path := getattr(ns, "api_key_file", None)) is not None:
        try:
            key = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise UsageError(f"--api-key-file {path}: cannot read it: {reason.lower()}") from None
        if not key:
            raise UsageError(f"--api-key-file {path}: the file is empty")
        if any(c in key for c in "\r\n"):
            raise UsageError(f"--api-key-file {path}: holds more than one line; want the key alone")
        return key
    return os.environ.get("OPENAI_API_KEY") or None


def _with_trust(ns: argparse.Namespace, target: TargetConfig) -> TargetConfig:
    """``--ca-cert``, ``--insecure`` and ``--no-trust-env``, each checked here in one line (a bundle that
    cannot be read, a SOCKS proxy in the environment) rather than on the first request."""
    from tui.engine.network import ProxyError, proxy_for, ssl_context

    ca_cert = getattr(ns, "ca_cert", None)
    insecure = bool(getattr(ns, "insecure", False))
    if ca_cert and insecure:
        raise UsageError("--ca-cert and --insecure contradict each other: give one")
    # The demo simulator is tokentop's own server on 127.0.0.1: never through the environment's proxy.
    trust_env = bool(getattr(ns, "trust_env", True)) and not target.demo
    target = replace(target, ca_cert=ca_cert, insecure=insecure, trust_env=trust_env)
    try:
        ssl_context(target)  # also for http://: both transports build one, and a bad one would fail there
    except (OSError, ssl.SSLError) as exc:
        if isinstance(exc, ssl.SSLError):
            reason = str(exc.reason or exc).replace("_", " ").lower()  # "no certificate or crl found"
        else:
            reason = str(exc.strerror or exc).lower()
        if ca_cert:
            raise UsageError(f"--ca-cert {ca_cert}: not a readable PEM bundle: {reason}") from None
        where = " ".join(f"{v}={os.environ[v]}" for v in ("SSL_CERT_FILE", "SSL_CERT_DIR") if v in os.environ)
        raise UsageError(
            f"the environment's CA bundle ({where or 'certifi'}) cannot be read: {reason}; "
            "fix or unset it, or give --no-trust-env"
        ) from None
    try:
        proxy_for(target)
    except ProxyError as exc:
        raise UsageError(str(exc)) from None
    return target


def _refuse_credentials(url: str, flag: str = "--url") -> None:
    """Refuse ``http://user:PASS@host`` up front, in one line that does not repeat it.

    Credentials in the URL would be shown wherever the URL is (the live header, errors, results), and the
    two HTTP stacks beneath httpx disagree on them, so every request failed at once. Refusing is simpler
    and safer than a second auth path; Basic auth remains possible with --header."""
    try:
        parts = urlsplit(url.strip())
        has_credentials = parts.username is not None or parts.password is not None
    except ValueError:
        has_credentials = "@" in url.split("/", 3)[2] if url.count("/") >= 2 else False
    if has_credentials:
        raise UsageError(
            f"{flag} must not carry credentials (user:password@host): give a key with --api-key, "
            "or Basic auth with --header 'Authorization: Basic ...'"
        )


def engine_options_from_args(ns: argparse.Namespace) -> EngineOptions:
    """The engine tunables a face's flags set: the SLOs, the closed-loop user stagger, server metrics."""
    metrics_url = getattr(ns, "metrics_url", None)
    if metrics_url is not None and not metrics_url.startswith(("http://", "https://")):
        raise UsageError(f"--metrics-url must start with http:// or https://: {metrics_url!r}")
    return EngineOptions(
        slo_ttft_ms=ns.slo_ttft_ms,
        slo_tpot_ms=ns.slo_tpot_ms,
        slo_e2e_ms=ns.slo_e2e_ms,
        slo_target=ns.slo_target,
        user_stagger_s=ns.user_stagger_ms / 1e3,
        server_metrics=getattr(ns, "server_metrics", True),
        metrics_url=metrics_url,
        server_metrics_log=getattr(ns, "server_metrics_log", None),
        gpu_metrics=gpu_metrics_from_args(ns),
        canary_rate=canary_rate_from_args(ns),
        isl_probe=getattr(ns, "isl_probe", True),
        placement=placement_from_args(ns),
    )


def placement_from_args(ns: argparse.Namespace) -> RayPlacement | None:
    """``--ray`` and its flags as plain data (Ray itself is imported only by the engine, and only then)."""
    address = getattr(ns, "ray", None)
    per_node = getattr(ns, "workers_per_node", None)
    if address is None:
        if per_node is not None:
            raise UsageError("--workers-per-node needs --ray")
        return None
    return RayPlacement(
        address=address,
        per_node=per_node,
        head_workers=getattr(ns, "ray_head_workers", False),
        on_node_loss=getattr(ns, "on_node_loss", "stop"),
    )


def canary_rate_from_args(ns: argparse.Namespace) -> float | None:
    """``--canary-rate``: its figures live in the server pane and summaries, so it needs the scrape on."""
    rate: float | None = getattr(ns, "canary_rate", None)
    if rate is not None and not getattr(ns, "server_metrics", True):
        raise UsageError("--canary-rate is shown beside the server's metrics: drop --no-server-metrics")
    return rate


def gpu_metrics_from_args(ns: argparse.Namespace) -> str | None:
    """``--gpu-metrics``, checked before any load: a URL, or `nvml` with NVML importable."""
    spec: str | None = getattr(ns, "gpu_metrics", None)
    if spec is None:
        return None
    from tui.engine.server_metrics.gpu_source import NVML, nvml_source

    if spec == NVML:
        try:
            nvml_source()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    elif not spec.startswith(("http://", "https://")):
        raise UsageError(f"--gpu-metrics takes a DCGM exporter's URL (http://...) or 'nvml', got {spec!r}")
    return spec


def initial_load(ns: argparse.Namespace, *, demo: bool) -> LoadTarget:
    """The live app's first target: a trace at ``--trace-speed``, ``--rate`` or ``--concurrency``, else 1 user
    (4 in the demo)."""
    if getattr(ns, "trace", None) is not None:
        speeds = getattr(ns, "trace_speed", None) or [1.0]
        if len(speeds) > 1:
            raise UsageError(
                "the live app starts at one --trace-speed (the keys change it; bench sweeps a list)"
            )
        return LoadTarget(mode="trace", speed=float(speeds[0]))
    if ns.rate is not None:
        return LoadTarget(mode="rate", rate=ns.rate)
    if ns.concurrency is not None:
        return LoadTarget(mode="concurrency", concurrency=ns.concurrency)
    return LoadTarget(mode="concurrency", concurrency=DEMO_CONCURRENCY if demo else 1)


def level_targets_from_args(ns: argparse.Namespace) -> list[LoadTarget]:
    """bench's levels, one per ``--concurrency`` or ``--rate`` value (default: one user), or one per
    ``--trace-speed`` with ``--trace``, each replaying the trace from its start."""
    if getattr(ns, "trace", None) is not None:
        return [
            LoadTarget(mode="trace", speed=float(x), from_start=True, max_concurrency=ns.max_concurrency)
            for x in (getattr(ns, "trace_speed", None) or [1.0])
        ]
    if ns.rate:
        return [
            LoadTarget(mode="rate", rate=float(r), arrival=ns.arrival, max_concurrency=ns.max_concurrency)
            for r in ns.rate
        ]
    if ns.max_concurrency is not None:
        raise UsageError("--max-concurrency applies to open-loop --rate levels")
    return [LoadTarget(mode="concurrency", concurrency=int(c)) for c in (ns.concurrency or [1])]
