"""The target group: which server (``--url``, ``$OPENAI_BASE_URL``, else the demo simulator), its API
(``--api``, ``--endpoint``), the API key and the trust flags (``--ca-cert``, ``--insecure``,
``--no-trust-env``), each declared here beside the reader that turns it into a `TargetConfig` and
reports an unusable value as a `UsageError`. Shared by the commands that send load (live, bench); watch
takes the URL and key readers.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from tui.argtypes import positive_float
from tui.cli.argv_secret import hide_in_argv
from tui.configs import RunTarget, UsageError
from tui.demo import DemoConfig
from tui.engine.config import APIS, Endpoint, TargetConfig, normalise_base_url
from tui.engine.redact import display_url

BASE_URL_ENV = "OPENAI_BASE_URL"
"""The OpenAI SDK's variable for the server's base URL: honoured when ``--url`` is not given."""

DEMO_URL_UNTIL_STARTED = "http://127.0.0.1"
"""The simulator's address before it runs; its port is known once it does (`RunTarget.at`)."""


def add_target_args(p: argparse.ArgumentParser) -> None:
    """The server, its API and key, headers, the timeout, TLS trust; and the demo's profile."""
    g = p.add_argument_group("target")
    g.add_argument(
        "--url",
        help="server base URL, with or without /v1 (default: $OPENAI_BASE_URL if set, else the built-in "
        "simulator)",
    )
    g.add_argument("--model", help="model name (default: the first from /v1/models)")
    g.add_argument(
        "--api",
        "--endpoint-type",
        choices=APIS,
        default=TargetConfig.endpoint,
        help=f"the API to drive (default {TargetConfig.endpoint}): OpenAI chat or completions, OpenAI "
        "Responses, Anthropic Messages, or embeddings (not streamed)",
    )
    g.add_argument(
        "--endpoint",
        type=_endpoint,
        metavar="/PATH",
        help="the full request path for a server whose API is not under /v1, joined to --url as given, "
        "nothing added (e.g. /api/v2/chat; its API: --api); chat or completions here is --api's older "
        "spelling",
    )
    add_api_key_args(g)
    g.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="extra HTTP header")
    g.add_argument("--extra-body", metavar="JSON", help="JSON object merged into every request body")
    g.add_argument(
        "--timeout",
        type=positive_float,
        default=TargetConfig.timeout_s,
        metavar="S",
        help="per request, also the longest silence allowed between chunks",
    )
    g.add_argument(
        "--ca-cert",
        metavar="PATH",
        help="verify the server's TLS certificate against this PEM bundle (a self-signed or company CA)",
    )
    g.add_argument("--insecure", action="store_true", help="do not verify the server's TLS certificate")
    g.add_argument(
        "--no-trust-env",
        dest="trust_env",
        action="store_false",
        help="ignore HTTP(S)_PROXY, ALL_PROXY, NO_PROXY, SSL_CERT_FILE, SSL_CERT_DIR (honoured by default)",
    )
    p.add_argument(
        "--sim-profile",
        default=DemoConfig.profile,
        metavar="NAME",
        help="simulator profile when no --url is given",
    )


def add_api_key_args(p: argparse.ArgumentParser | argparse._ArgumentGroup, what: str = "API key") -> None:
    """``--api-key`` or ``--api-key-file`` (one of them; the variable when neither)."""
    key = p.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"{what} (default: $OPENAI_API_KEY); never printed or saved. Other users can see a command "
        "line: tokentop overwrites it in its own (on Linux), but prefer the variable or --api-key-file",
    )
    key.add_argument("--api-key-file", metavar="PATH", help="read the API key from this file (one line)")


def _endpoint(text: str) -> str:
    """``chat``, ``completions``, or a request path (it starts with ``/``; a URL belongs in --url)."""
    if text in ("chat", "completions") or (text.startswith("/") and not any(c.isspace() for c in text)):
        return text
    raise argparse.ArgumentTypeError(
        f"want chat, completions or a request path starting with /, got {text!r}"
    )


def run_target_from_args(ns: argparse.Namespace, *, time_scale: float = DemoConfig.time_scale) -> RunTarget:
    """The server a load face runs against, every flag of it checked now (before any simulator starts)."""
    demo = demo_from_args(ns, time_scale=time_scale)
    target = target_from_args(ns, demo_url=DEMO_URL_UNTIL_STARTED if demo is not None else None)
    return RunTarget(target=target, demo=demo, note=url_note(ns))


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


def demo_from_args(ns: argparse.Namespace, *, time_scale: float = DemoConfig.time_scale) -> DemoConfig | None:
    """The built-in simulator to start, or None when there is a target (``--url`` or ``$OPENAI_BASE_URL``).
    ``time_scale``: bench's ``--sim-time-scale`` (the live app runs the demo in real time). A ``--sim-*``
    flag with a target is refused: no simulator runs then, and ignoring it would leave the user believing
    it applied (a run "10 times faster" that was not)."""
    if url_from_args(ns) is not None:
        given = [
            flag
            for flag, value, default in (
                ("--sim-profile", ns.sim_profile, DemoConfig.profile),
                ("--sim-time-scale", time_scale, DemoConfig.time_scale),
            )
            if value != default
        ]
        if given:
            one = len(given) == 1
            raise UsageError(
                f"{' and '.join(given)} {'is' if one else 'are'} for the built-in simulator, which does not "
                f"run with {_url_flag(ns)}: drop {'it' if one else 'them'} (or the URL, for the demo)"
            )
        return None
    if endpoint_from_args(ns)[1] is not None:
        raise UsageError("--endpoint /PATH needs --url: the built-in simulator serves its API under /v1 only")
    return DemoConfig(profile=ns.sim_profile, seed=ns.seed, time_scale=time_scale)


def endpoint_from_args(ns: argparse.Namespace) -> tuple[Endpoint, str | None]:
    """The API and the request path (None: the API's standard one under ``/v1``) from ``--api`` and
    ``--endpoint /PATH`` (or its older ``--endpoint chat|completions``, which names the API)."""
    api: Endpoint = ns.api
    value: str | None = ns.endpoint
    if value is None or value.startswith("/"):
        return api, value
    if api not in (TargetConfig.endpoint, value):
        raise UsageError(f"--endpoint {value} and --api {api} contradict each other: give one")
    return ("completions" if value == "completions" else "chat"), None


def base_url_from_args(ns: argparse.Namespace, *, demo_url: str | None = None, add_v1: bool = True) -> str:
    """The server's base URL, normalised, from ``--url``, else ``$OPENAI_BASE_URL``, else ``demo_url``: every
    face resolves it here, so ``tokentop watch`` reads the variable as the load commands do. A bad value is
    a `UsageError` naming where it came from, and credentials in it are refused without being repeated."""
    given = url_from_args(ns)
    url = given or demo_url
    if url is None:
        raise UsageError(f"no server: give --url or set ${BASE_URL_ENV}")
    refuse_credentials(url, _url_flag(ns))
    try:
        return normalise_base_url(with_scheme(url), add_v1=add_v1)
    except ValueError as exc:
        from_env = ns.url is None and given is not None
        raise UsageError(f"${BASE_URL_ENV}: {exc}" if from_env else str(exc)) from None


def target_from_args(ns: argparse.Namespace, *, demo_url: str | None = None) -> TargetConfig:
    """Build the target; `demo_url` is the simulator's URL when tokentop started it itself."""
    api_key = api_key_from_args(ns)  # first: a key on the command line is hidden before anything can fail
    given = url_from_args(ns)
    endpoint, path = endpoint_from_args(ns)
    base_url = base_url_from_args(ns, demo_url=demo_url, add_v1=path is None)
    headers = headers_from(ns.header)
    extra: tuple[tuple[str, object], ...] = ()
    if ns.extra_body:
        try:
            body = json.loads(ns.extra_body)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--extra-body is not valid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(body, dict):
            raise UsageError("--extra-body must be a JSON object")
        extra = tuple(body.items())
    target = TargetConfig(
        base_url=base_url,
        model=ns.model,
        endpoint=endpoint,
        endpoint_path=path,
        api_key=api_key,
        headers=headers,
        extra_body=extra,
        timeout_s=ns.timeout,
        demo=given is None,
    )
    return _with_trust(ns, target)


def headers_from(items: list[str], flag: str = "--header") -> tuple[tuple[str, str], ...]:
    """``NAME:VALUE`` items as (name, value) pairs; a malformed one is a `UsageError` naming ``flag``."""
    headers: list[tuple[str, str]] = []
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"{flag} wants NAME:VALUE, got {item!r}")
        headers.append((name.strip(), value.strip()))
    return tuple(headers)


def api_key_from_args(ns: argparse.Namespace) -> str | None:
    """``--api-key``, else the file ``--api-key-file`` names (read once, stripped), else ``$OPENAI_API_KEY``.
    The file and the variable keep the key out of the process list, which every user can read: a key given
    on the command line is overwritten there (`hide_in_argv`), with a warning where it cannot be."""
    if key := ns.api_key:
        if not hide_in_argv(key):
            print(
                "tokentop: warning: --api-key is visible to other users in the process list; "
                "give it by $OPENAI_API_KEY or --api-key-file",
                file=sys.stderr,
            )
        return str(key)
    if (path := ns.api_key_file) is not None:
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
    from tui.engine.network import ProxyError, proxy_for, ssl_context, tls_possible

    ca_cert: str | None = ns.ca_cert
    insecure: bool = ns.insecure
    if ca_cert and insecure:
        raise UsageError("--ca-cert and --insecure contradict each other: give one")
    # The demo simulator is tokentop's own server on 127.0.0.1: never through the environment's proxy.
    trust_env = ns.trust_env and not target.demo
    target = replace(target, ca_cert=ca_cert, insecure=insecure, trust_env=trust_env)
    try:
        if ca_cert or tls_possible(target):  # a plain-http target's transports load no CA bundle
            ssl_context(target)
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


def refuse_credentials(url: str, flag: str = "--url") -> None:
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
