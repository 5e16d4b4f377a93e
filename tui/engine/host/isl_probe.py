"""The ISL probe: before the workers start, learn what the synthetic prompt costs on this server.

Words are not tokens, and the chat template adds more; the synthetic workload learns the cost from every
answer's ``usage`` (`tui.engine.workload.synthetic.IslCalibrator`), but its first answers come late: at
``--concurrency 64`` the first 64 prompts are all sized blind. So the face sends a few one-token,
non-streaming requests first, through the very workload the workers will build, and hands what the server
counted to every worker (`WorkloadConfig.isl_observations`): the first measured request is sized right too.

Works on any OpenAI-compatible server that reports ``usage`` (it needs no tokenize endpoint, and includes the
chat template by construction). Blocking, a few seconds at most; never shows the API key. The probe requests
carry ``x-tokentop-request-id: probe-<n>`` (``probe-prefix-<n>`` sizing a shared prefix) and are not part of
the run's records.

Synthetic prompts, alone, behind a shared prefix or as a conversation's new messages, are sized this way
(drawn lengths from both ends of their range, `probe_workloads`); a
dataset's prompts have the file's lengths, so `skip_reason` says why no probe is sent for them (unless a
shared prefix needs sizing). A ``--shared-prefix N`` without ``--tokenizer`` is sized here too
(`size_prefix`): the word count whose cost by the server's count is N, found from a few one-token requests
that each put the candidate prefix after the same few probe words and subtract what those words alone cost
(so they do not warm a prefix cache for the run: its prompts start with the prefix, these with other words).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

import httpx
import orjson

from tui.engine.config import LengthDist, TargetConfig, WorkloadConfig
from tui.engine.network import sync_client
from tui.engine.records import RequestRecord
from tui.engine.redact import mask_secret
from tui.engine.stream.apis import api_headers
from tui.engine.stream.openai import build_body, endpoint_url, error_message
from tui.engine.workload import RequestKey, RequestSpec, SyntheticWorkload
from tui.engine.workload.shaped import ShapedWorkload, is_shaped, longest_isl, shortest_isl
from tui.engine.workload.synthetic import MAX_PROMPT_FACTOR
from tui.engine.workload.text import shared_prefix_text, unique_head

PROBE_REQUESTS = 4
"""Enough for the calibration's slope (two lengths) and an overhead averaged over the per-request head words;
each asks for one output token, so on a slow server the probe costs about four prefills."""
TRACE_PROBE_ISL = (64, 1024)
"""A trace's lengths are its own, unknown until read: the probe measures the cost per word across these."""
PREFIX_STEPS = 6
"""At most this many candidate prefix lengths are tried (each a request): the first guess from the slope is
within a few tokens, and each step moves by the measured cost per word."""
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


def probe_workloads(workload: WorkloadConfig) -> list[SyntheticWorkload | ShapedWorkload]:
    """What the probe prompts are made by: the run's own kind of prompt text, asking for one token. For drawn
    lengths, two: one at the shortest ISL and one at the longest, taking turns, so the cost per word is
    measured across the range the run will ask for (two prompts a word apart give one word's cost, and a
    slope a few percent off puts the longest prompts tokens off)."""
    bare = replace(workload, osl=1, fixed_osl=False, isl_observations=(), trace=None)
    if workload.trace is not None:
        lo, hi = TRACE_PROBE_ISL  # a trace's prompts are of the shaped prompts' one-token words
    elif not is_shaped(workload):
        return [SyntheticWorkload(bare)]
    else:
        lo, hi = shortest_isl(workload), longest_isl(workload)
    return [
        ShapedWorkload(replace(bare, isl_dist=LengthDist("fixed", isl, isl), osl_dist=None, scenarios=()))
        for isl in dict.fromkeys((lo, hi))
    ]


PROBE_READ_S = 60.0
"""A probe request's read timeout at most (the target's own when shorter): one prefill and one token."""


def longest_probe_s(target: TargetConfig) -> float:
    """How long the probe can take: every request it may send, each to its timeouts."""
    return (PROBE_REQUESTS + PREFIX_STEPS) * (min(target.timeout_s, PROBE_READ_S) + target.connect_timeout_s)


def skip_reason(workload: WorkloadConfig) -> str | None:
    """Why the probe would teach this workload nothing (None: send it): it sizes synthetic prompts, and a
    shared prefix that no tokenizer cuts."""
    if workload.dataset is not None and not _prefix_to_size(workload):
        return "dataset prompts: their lengths are the file's"
    return None


def _prefix_to_size(workload: WorkloadConfig) -> bool:
    return workload.shared_prefix > 0 and workload.tokenizer is None


Count = Callable[[int, RequestSpec], "int | str"]
"""Sends probe request ``n`` and returns the server's prompt tokens, or a notice."""


def size_prefix(workload: WorkloadConfig, count: Count, slope: float | None) -> tuple[int, int] | str:
    """(words, tokens): the prefix word count whose cost is nearest ``workload.shared_prefix`` tokens by the
    server's count, or a notice. ``slope``: tokens per word, if the calibration learned it."""
    target = workload.shared_prefix
    guard = unique_head(random.Random(f"{workload.seed}:prefix-probe"), 4) + " "
    tail = "end"

    def spec(text: str) -> RequestSpec:
        return RequestSpec(prompt=guard + text + tail, max_tokens=1)

    base = count(0, spec(""))
    if isinstance(base, str):
        return base
    words = max(1, round(target / (slope or 1.0)))
    tried: dict[int, int] = {}
    for step in range(PREFIX_STEPS):
        got = count(step + 1, spec(shared_prefix_text(workload.seed, words, workload.prompt_salt)))
        if isinstance(got, str):
            return got
        tried[words] = got - base
        cost = tried[words]
        if cost == target:
            break
        move = round((target - cost) * words / max(1, cost))
        words = min(MAX_PROMPT_FACTOR * target, max(1, words + (move or (1 if target > cost else -1))))
        if words in tried:
            break
    best = min(tried, key=lambda w: (abs(tried[w] - target), w))
    return best, tried[best]


def probe_isl(
    target: TargetConfig,
    workload: WorkloadConfig,
    model: str,
    *,
    requests: int = PROBE_REQUESTS,
    timeout_s: float | None = None,
) -> IslProbe:
    """Send ``requests`` one-token prompts shaped by ``workload`` (none for a dataset) and, when a shared
    prefix needs it, `size_prefix`'s; return the workload with what the server counted. Never raises for a
    server's answer: a failure ends the probe with a notice."""
    probes = probe_workloads(workload)
    headers = {
        "content-type": "application/json",
        **api_headers(target.endpoint, target.api_key),
        **{name.lower(): value for name, value in target.headers},
    }
    read_s = timeout_s if timeout_s is not None else min(target.timeout_s, PROBE_READ_S)
    timeout = httpx.Timeout(connect=target.connect_timeout_s, read=read_s, write=read_s, pool=read_s)
    counted: list[int] = []
    notice: str | None = None
    sized = workload.shared_prefix_sized
    with sync_client(target, timeout) as client:  # trusted and routed as the workers are

        def count(name: str, spec: RequestSpec) -> int | str:
            body = orjson.loads(build_body(target, model, spec, fixed_osl_fields=False))
            if "stream" in body:  # embeddings have none
                body["stream"] = False
            body.pop("stream_options", None)
            try:
                response = client.post(
                    endpoint_url(target),
                    content=orjson.dumps(body),
                    headers={**headers, "x-tokentop-request-id": name},
                )
            except httpx.HTTPError as exc:
                return f"ISL probe: {type(exc).__name__}: {exc}"
            tokens = _prompt_tokens(response)
            if tokens is None:
                # masked before error_message cuts it: a long key cut in half would leak its start
                masked = mask_secret(response.content.decode("utf-8", "replace"), target.api_key).encode()
                detail = error_message(masked) if response.status_code >= 400 else "no usage"
                return f"ISL probe: HTTP {response.status_code} {detail}; prompts sized from answers only"
            return tokens

        observed: list[tuple[int, int]] = []
        for seq in range(requests if workload.dataset is None else 0):
            key = RequestKey(PROBE_WORKER, seq)
            probe = probes[seq % len(probes)]
            spec = probe.next_request(key)
            tokens = count(f"probe-{seq}", spec)
            if isinstance(tokens, str):
                notice = tokens
                break
            counted.append(tokens)
            record = RequestRecord(request_id=seq + 1, worker=0, seq=seq, level_id=0, sent_ns=0)
            record.input_tokens, record.input_source = tokens, "usage"
            refused, learned = probe.sizer.refused, len(probe.sizer.observed)
            probe.on_response(key, spec, None, record)
            if probe.sizer.refused is not refused:  # a count that is no count: none of them is used
                notice = _refused_notice(counted, probe.sizer.refused)
                observed.clear()
                break
            if len(probe.sizer.observed) > learned:  # a prompt counted as 0 tokens teaches nothing
                observed.append(probe.sizer.observed[-1])
        if notice is None and _prefix_to_size(workload):
            got = size_prefix(
                workload, lambda n, spec: count(f"probe-prefix-{n}", spec), probes[0].sizer.calibrator.slope
            )
            if isinstance(got, str):
                notice = got.replace(
                    "prompts sized", f"the shared prefix is {workload.shared_prefix} words; prompts sized"
                )
            else:
                sized = got
    if notice is not None:
        notice = mask_secret(notice, target.api_key)
    observations = tuple(observed)
    sized_workload = replace(workload, isl_observations=observations, shared_prefix_sized=sized)
    return IslProbe(sized_workload, tuple(counted), notice)


def _refused_notice(counted: list[int], refused: tuple[int, int] | None) -> str:
    words = f" (the last for {refused[0]} words)" if refused is not None else ""
    shown = ", ".join(str(t) for t in counted[-4:])
    return (
        f"ISL probe: the server's prompt_tokens ({shown}){words} do not grow with the prompt: not used; "
        "prompts sized from answers only"
    )


def _prompt_tokens(response: httpx.Response) -> int | None:
    if response.status_code != 200:
        return None
    try:
        usage = orjson.loads(response.content).get("usage") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return None
    # OpenAI's chat, completions and embeddings say prompt_tokens; Responses and Messages input_tokens
    tokens = usage.get("prompt_tokens", usage.get("input_tokens")) if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and tokens > 0 else None
