"""Ask the server to drop its prefix cache, so what follows starts cold (``--reset-cache``, the app's key,
``bench --reset-cache-between-levels``).

A warm prefix cache changes TTFT by tens of times without a sign in the output; salting prompts keeps a run
from hitting its own earlier prompts, but only the server can forget what another client sent. Each server
has its own way, none of them part of the OpenAI API:

- vLLM: ``POST /reset_prefix_cache`` (served only when started with ``VLLM_SERVER_DEV_MODE=1``);
- SGLang: ``POST /flush_cache``;
- llama.cpp: ``POST /slots/{id}?action=erase`` for each slot ``GET /slots`` lists (it takes slot actions
  only when started with ``--slot-save-path``, else 501).

The server kind from its ``/metrics`` picks one; unknown, each is tried in that order until one is served.
A server that serves none (404/405 everywhere) gets one line saying so and how to turn it on. Blocking, a
few requests at most, from the face's process; never shows the API key.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

import httpx

from tui.engine.config import TargetConfig
from tui.engine.network import sync_client
from tui.engine.redact import mask_secret

TIMEOUT_S = 10.0
"""Each request's bound: vLLM answers at once, but a busy server may take a moment to free its blocks."""
REFUSED = (404, 405, 501)
"""What a server that does not serve an endpoint answers (FastAPI: 404 unknown, 405 another method;
llama.cpp: 501 for a slot action without ``--slot-save-path``)."""
ENDPOINTS = {"vllm": "/reset_prefix_cache", "sglang": "/flush_cache", "llamacpp": "/slots"}
"""Each server kind's way, tried in this order when the kind is unknown."""
HOW_TO_ENABLE = (
    "vLLM serves POST /reset_prefix_cache only when started with VLLM_SERVER_DEV_MODE=1 in its environment; "
    "llama.cpp erases its slots only when started with --slot-save-path DIR"
)


class ResetOutcome(NamedTuple):
    """Whether the cache was dropped, and the one line that says so (or why not)."""

    done: bool
    line: str
    refused: bool = False
    """The server serves no reset (every way `REFUSED`), as against one that failed."""


def server_root(base_url: str) -> str:
    """`http://host:port/v1` -> `http://host:port`: these endpoints sit beside ``/v1``, as ``/metrics``."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    path = path.removesuffix("/v1")
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def reset_prefix_cache(
    target: TargetConfig, kind: str | None = None, *, timeout_s: float = TIMEOUT_S
) -> ResetOutcome:
    """Drop the server's prefix cache by its kind's endpoint (each in turn when ``kind`` is not one of
    `ENDPOINTS`); the outcome's line names what answered or, refused, how to enable it."""
    root = server_root(target.base_url)
    headers = dict(target.headers)
    if target.api_key:
        headers["authorization"] = f"Bearer {target.api_key}"
    kinds = [kind] if kind in ENDPOINTS else list(ENDPOINTS)
    timeout = httpx.Timeout(connect=target.connect_timeout_s, read=timeout_s, write=timeout_s, pool=timeout_s)
    refused: list[str] = []
    try:
        with sync_client(target, timeout) as client:
            for name in kinds:
                path = ENDPOINTS[name]
                status = (
                    _llamacpp(client, root, headers)
                    if name == "llamacpp"
                    else _post(client, root + path, headers)
                )
                if status in REFUSED:
                    refused.append(f"{path}: {status}")
                    continue
                if 200 <= status < 300:
                    return ResetOutcome(
                        True, f"prefix cache dropped (POST {path}): the next level starts cold"
                    )
                return ResetOutcome(False, f"prefix cache reset failed: POST {path} answered HTTP {status}")
    except httpx.HTTPError as exc:
        message = mask_secret(f"{type(exc).__name__}: {exc}", target.api_key)
        return ResetOutcome(False, f"prefix cache reset failed: {message}")
    return ResetOutcome(
        False,
        f"the server refused to drop its prefix cache ({', '.join(refused)}): {HOW_TO_ENABLE}",
        refused=True,
    )


def _post(client: httpx.Client, url: str, headers: dict[str, str]) -> int:
    return client.post(url, headers=headers).status_code


def _llamacpp(client: httpx.Client, root: str, headers: dict[str, str]) -> int:
    """Erase every slot ``GET /slots`` lists; its status when it lists none it can read, else the first
    erase's that failed, else 200."""
    listed = client.get(root + "/slots", headers=headers)
    try:
        ids = [s["id"] for s in listed.json() if isinstance(s, dict) and isinstance(s.get("id"), int)]
    except (ValueError, TypeError):
        ids = []
    if listed.status_code != 200 or not ids:
        return listed.status_code if listed.status_code != 200 else 404
    for slot in ids:
        status = client.post(f"{root}/slots/{slot}", params={"action": "erase"}, headers=headers).status_code
        if not 200 <= status < 300:
            return status
    return 200
