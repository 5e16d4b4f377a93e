"""The start-up probe: does the server answer, and which model does it serve (``/v1/models``).

Run by the handle before it spawns workers, and by faces that want the answer first (bench prints the
model before its first level). Blocking, one request, never shows the API key.
"""

from __future__ import annotations

from typing import NamedTuple

import httpx

from tui.engine.config import TargetConfig
from tui.engine.network import proxy_named, sync_client
from tui.engine.redact import mask_secret
from tui.engine.stream.error_class import classify_exception
from tui.engine.stream.openai import error_message

SHOWN_MODELS = 8
"""The most model names an error or a note lists (a gateway may serve hundreds)."""


class ProbeError(Exception):
    """The target cannot be used; the message is one line, fit to print."""


class Probed(NamedTuple):
    """The model to use, and every model the server listed (empty when it lists none it could read)."""

    model: str
    served: tuple[str, ...] = ()

    def note(self, asked: str | None) -> str | None:
        """One line saying the model was picked from several when none was asked for, else None."""
        if asked or len(self.served) < 2:
            return None
        return f"the first of {len(self.served)} served ({_names(self.served)}): --model picks another"


def _names(models: tuple[str, ...]) -> str:
    shown = ", ".join(models[:SHOWN_MODELS])
    return shown + (f", ... ({len(models)} in all)" if len(models) > SHOWN_MODELS else "")


def probe_server(target: TargetConfig, *, timeout_s: float | None = None) -> str:
    """The model to use (`probe_models`), for a caller that needs nothing else."""
    return probe_models(target, timeout_s=timeout_s).model


def probe_models(target: TargetConfig, *, timeout_s: float | None = None) -> Probed:
    """Check that the server answers and return the model to use (``target.model`` or the first listed
    by ``/v1/models``; with ``--endpoint /PATH``, ``/models`` beside the URL as given: nothing guessed).
    A ``target.model`` the list does not hold is refused, naming what is served: echoing it back would
    read as confirmed, and every request would then fail. Blocking; raises `ProbeError` with a one-line
    reason. Never shows the API key."""
    url = target.base_url + "/models"
    headers = {name: value for name, value in target.headers}
    if target.api_key:
        headers["authorization"] = f"Bearer {target.api_key}"
    read_s = timeout_s if timeout_s is not None else min(target.timeout_s, 30.0)
    timeout = httpx.Timeout(connect=target.connect_timeout_s, read=read_s, write=read_s, pool=read_s)

    def scrub(text: str) -> str:
        return mask_secret(text, target.api_key)

    def detail(body: bytes) -> str:
        return error_message(scrub(body.decode("utf-8", "replace")).encode())  # masked before it is cut

    try:
        with sync_client(target, timeout) as client:  # trusted and routed as the workers are
            response = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        kind, message, _ = classify_exception(exc, started=False)
        if kind == "connect" and message.startswith("cannot connect: "):
            reason = message.removeprefix("cannot connect: ")
            if (via := proxy_named(target)) is not None:  # the proxy refused us, not (yet) the server
                raise ProbeError(
                    scrub(
                        f"cannot connect to {via} on the way to {target.base_url}: {reason}; fix or unset "
                        "it, or give --no-trust-env"
                    )
                ) from None
            raise ProbeError(scrub(f"cannot connect to {target.base_url}: {reason}")) from None
        if kind in ("connect", "tls"):  # "cannot resolve host NAME", "TLS: ..."
            raise ProbeError(scrub(f"{target.base_url}: {message}")) from None
        if kind == "timeout":
            raise ProbeError(f"{target.base_url} did not answer /models within {read_s:g} s") from None
        raise ProbeError(scrub(f"cannot reach {target.base_url}: {message}")) from None
    status = response.status_code
    if status in (401, 403):
        raise ProbeError(
            scrub(f"{target.base_url}: HTTP {status} {detail(response.content)} (check --api-key)")
        )
    if status != 200:
        if target.model:
            return Probed(target.model)  # some servers have no /models; the requests will tell
        raise ProbeError(scrub(f"{url}: HTTP {status} {detail(response.content)}; give --model"))
    try:
        data = response.json()
        models = tuple(str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and "id" in m)
    except (ValueError, AttributeError, TypeError):
        if target.model:
            return Probed(target.model)  # not a list we can read: the requests will tell
        raise ProbeError(
            f"{url} did not return an OpenAI model list; is this an OpenAI-compatible server?"
        ) from None
    if target.model:
        if models and target.model not in models:
            raise ProbeError(
                scrub(
                    f"{target.base_url} does not serve --model {target.model!r}; it serves {_names(models)}"
                )
            )
        return Probed(target.model, models)
    if not models:
        raise ProbeError(f"{url} lists no models; give --model")
    return Probed(models[0], models)
