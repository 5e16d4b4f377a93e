"""The ISL probe: before the workers start, learn what the synthetic prompt costs on this server.

Words are not tokens, and the chat template adds more; the synthetic workload learns the cost from every
answer's ``usage`` (`tui.engine.workload.synthetic.IslCalibrator`), but its first answers come late: at
``--concurrency 64`` the first 64 prompts are all sized blind. So the face sends a few one-token,
non-streaming requests first, through the very workload the workers will build, and hands what the server
counted to every worker (`WorkloadConfig.isl_observations`): the first measured request is sized right too.

Works on any OpenAI-compatible server that reports ``usage`` (it needs no tokenize endpoint, and includes the
chat template by construction). Blocking, a few seconds at most; never shows the API key. The probe requests
carry ``x-tokentop-request-id: probe-<n>`` and are not part of the run's records.

Only for synthetic prompts (shared prefix or not): a dataset's prompts have the file's lengths, and a
conversation's later turns are mostly its history, so neither is sized from ``--isl`` and `skip_reason`
says why the probe is not sent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import httpx
import orjson

from tui.engine.config import TargetConfig, WorkloadConfig
from tui.engine.network import sync_client
from tui.engine.records import RequestRecord
from tui.engine.secrets import mask_secret
from tui.engine.stream.openai import build_body, endpoint_url, error_message
from tui.engine.workload import RequestKey, SyntheticWorkload

PROBE_REQUESTS = 4
"""Enough for the calibration's slope (two lengths) and an overhead averaged over the per-request head words;
each asks for one output token, so on a slow server the probe costs about four prefills."""
PROBE_WORKER = -1
"""The probe's prompts are built as by a worker no engine worker is: the same lengths and body text, but
other head words than the run's first prompts, so the probe does not warm a prefix cache for them."""


@dataclass(frozen=True)
class IslProbe:
    """What the probe learned."""

    workload: WorkloadConfig
    """The workload with the observations in (unchanged when none came back)."""
    prompt_tokens: tuple[int, ...] = ()
    """What the server counted for each probe prompt, in order."""
    notice: str | None = None
    """One line when the probe could not finish (the run goes on, sizing prompts from its own answers)."""


def skip_reason(workload: WorkloadConfig) -> str | None:
    """Why the probe would teach this workload nothing (None: send it): the probe sizes synthetic prompts."""
    if workload.dataset is not None:
        return "dataset prompts: their lengths are the file's"
    if workload.turns > 1:
        return "multi-turn conversations: later turns are their history"
    return None


def probe_isl(
    target: TargetConfig,
    workload: WorkloadConfig,
    model: str,
    *,
    requests: int = PROBE_REQUESTS,
    timeout_s: float | None = None,
) -> IslProbe:
    """Send ``requests`` one-token prompts shaped by ``workload`` and return it with what the server counted.
    Never raises for a server's answer: a failure ends the probe with a notice."""
    probe = SyntheticWorkload(replace(workload, osl=1, fixed_osl=False, isl_observations=()))
    headers = {"content-type": "application/json", **dict(target.headers)}
    if target.api_key:
        headers["authorization"] = f"Bearer {target.api_key}"
    read_s = timeout_s if timeout_s is not None else min(target.timeout_s, 60.0)
    timeout = httpx.Timeout(connect=target.connect_timeout_s, read=read_s, write=read_s, pool=read_s)
    counted: list[int] = []
    notice: str | None = None
    with sync_client(target, timeout) as client:  # trusted and routed as the workers are
        for seq in range(requests):
            key = RequestKey(PROBE_WORKER, seq)
            spec = probe.next_request(key)
            body = orjson.loads(build_body(target, model, spec, fixed_osl_fields=False))
            body["stream"] = False
            body.pop("stream_options", None)
            try:
                response = client.post(
                    endpoint_url(target),
                    content=orjson.dumps(body),
                    headers={**headers, "x-tokentop-request-id": f"probe-{seq}"},
                )
            except httpx.HTTPError as exc:
                notice = f"ISL probe: {type(exc).__name__}: {exc}"
                break
            tokens = _prompt_tokens(response)
            if tokens is None:
                # masked before error_message cuts it: a long key cut in half would leak its start
                masked = mask_secret(response.content.decode("utf-8", "replace"), target.api_key).encode()
                detail = error_message(masked) if response.status_code >= 400 else "no usage"
                notice = f"ISL probe: HTTP {response.status_code} {detail}; prompts sized from answers only"
                break
            counted.append(tokens)
            record = RequestRecord(request_id=seq + 1, worker=0, seq=seq, level_id=0, sent_ns=0)
            record.input_tokens, record.input_source = tokens, "usage"
            probe.on_response(key, spec, None, record)
    if notice is not None:
        notice = mask_secret(notice, target.api_key)
    observations = tuple(probe.observed)
    return IslProbe(replace(workload, isl_observations=observations), tuple(counted), notice)


def _prompt_tokens(response: httpx.Response) -> int | None:
    if response.status_code != 200:
        return None
    try:
        usage = orjson.loads(response.content).get("usage") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and tokens > 0 else None
