"""The OpenAI-compatible wire format: request bodies, prompts, and what each streamed chunk means.

Kept free of I/O so it can be tested (and timed) alone; `tui.engine.stream.client` does the sending.
"""

from __future__ import annotations

import random
from array import array
from typing import Any

import orjson

from tui.engine.config import TargetConfig, WorkloadConfig

FIXED_OSL_FIELDS = ("ignore_eos", "min_tokens")
"""Non-standard fields that pin the output length (vLLM, SGLang and the simulator accept them)."""

_WORDS = """
time year people way day man thing woman life child world school state family student group country
problem hand part place case week company system program question work government number night point
home water room mother area money story fact month lot right study book eye job word business issue
side kind head house service friend father power hour game line end member law car city community
name president team minute idea kid body information back parent face others level office door
health person art war history party result change morning reason research girl guy moment air
teacher force education foot boy age policy process music market sense nation plan college interest
death experience effect use class control care field development role effort rate heart drug show
leader light voice wife police mind price report decision son view relationship town road arm
difference value building action model season society tax director position player record paper
space ground form event official matter center couple site project activity star table need court
oil situation cost industry figure street image phone data picture practice piece land product
doctor wall patient worker news test movie north love support technology step baby computer type
attention film tree source organization hair window evidence population truth song theory rock bank
church river garden summer winter stone bridge cloud island
"""
_VOCAB: tuple[str, ...] = tuple(w for w in _WORDS.split() if len(w) <= 8)
"""Short common words: one token each for most tokenizers (and by the simulator's rule)."""


def prompt_words(workload: WorkloadConfig, worker: int, seq: int) -> str:
    """A prompt of about ``workload.isl`` words (the simulator counts one token per word), deterministic in
    (seed, worker, seq).

    The first few words differ per request so a real server's prefix cache cannot turn the whole prompt into
    a cache hit (which would make TTFT meaningless); the rest is one fixed text per seed.
    """
    head = random.Random(f"{workload.seed}:{worker}:{seq}").choices(_VOCAB, k=min(4, workload.isl))
    return " ".join(head) + _body_text(workload.seed, max(0, workload.isl - len(head)))


_BODY_CACHE: dict[tuple[int, int], str] = {}


def _body_text(seed: int, words: int) -> str:
    key = (seed, words)
    text = _BODY_CACHE.get(key)
    if text is None:
        rng = random.Random(seed)
        text = "".join(" " + w for w in rng.choices(_VOCAB, k=words))
        if len(_BODY_CACHE) > 8:
            _BODY_CACHE.clear()
        _BODY_CACHE[key] = text
    return text


def estimate_prompt_tokens(workload: WorkloadConfig) -> int:
    """What we believe the prompt costs when the server reports no usage (one token per word, plus a few
    for the chat template)."""
    return workload.isl


def build_body(
    target: TargetConfig,
    workload: WorkloadConfig,
    model: str,
    prompt: str,
    *,
    fixed_osl_fields: bool = True,
) -> bytes:
    """The JSON body of one streaming request. ``--extra-body`` fields are merged last (they win)."""
    body: dict[str, Any] = {"model": model}
    if target.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    body["max_tokens"] = workload.osl
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if workload.fixed_osl and fixed_osl_fields:
        body["ignore_eos"] = True
        body["min_tokens"] = workload.osl
    for key, value in target.extra_body:
        body[key] = value
    return orjson.dumps(body)


def endpoint_url(target: TargetConfig) -> str:
    """The streaming endpoint for the target's API flavour."""
    return target.base_url + ("/chat/completions" if target.endpoint == "chat" else "/completions")


def rejects_fixed_osl_fields(status: int, body_text: str) -> bool:
    """A 400 whose message names one of `FIXED_OSL_FIELDS` (an unknown or forbidden extra field)."""
    return status in (400, 422) and any(f in body_text for f in FIXED_OSL_FIELDS)


def error_message(body: bytes, limit: int = 200) -> str:
    """One line from an error response body: the JSON ``error.message`` (or ``message``/``detail``) when there
    is one, else the start of the text."""
    text = ""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or err.get("msg")
            text = str(msg) if msg else orjson.dumps(err).decode()
        elif isinstance(err, str):
            text = err
        elif obj.get("detail"):
            text = str(obj["detail"])
    if not text:
        text = body.decode("utf-8", "replace")
    return one_line(text, limit)


def one_line(text: str, limit: int = 200) -> str:
    """Collapse whitespace (newlines included) and cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class StreamAccumulator:
    """What a request's stream has said so far. Updated once per chunk on the hot path, so it is plain
    attributes and no per-chunk allocation beyond the text pieces kept for the live lanes."""

    __slots__ = (
        "chunk_ns",
        "chunk_tokens",
        "done",
        "error",
        "finish_reason",
        "last_completion_tokens",
        "pending_text",
        "reasoning_chunks",
        "tokens",
        "tokens_known",
        "usage_completion",
        "usage_prompt",
    )

    def __init__(self) -> None:
        self.chunk_ns: array[int] = array("q")
        self.chunk_tokens: array[int] = array("q")
        self.tokens_known = True
        """Every content chunk so far carried a cumulative usage count (continuous usage stats)."""
        self.last_completion_tokens = 0
        self.tokens = 0
        """Output tokens so far: known per-chunk counts, else one per content chunk."""
        self.reasoning_chunks = 0
        self.pending_text: list[str] = []
        """Generated text not yet handed to the live lanes (the worker drains it every batch)."""
        self.usage_prompt: int | None = None
        self.usage_completion: int | None = None
        self.finish_reason: str | None = None
        self.error: str | None = None
        """An ``error`` object seen inside the stream (one line)."""
        self.done = False
        """``[DONE]`` seen."""


def apply_chunk(acc: StreamAccumulator, obj: Any, now_ns: int) -> None:
    """Fold one parsed chunk (chat or completions) into ``acc``.

    Handles: a role-only first delta (no content: not a content chunk), ``content``, ``reasoning_content`` /
    ``reasoning`` deltas, completions ``text``, ``finish_reason``, a usage-only final chunk with empty
    ``choices``, per-chunk cumulative usage (continuous usage stats), and an ``error`` object.
    """
    if type(obj) is not dict:
        acc.error = "malformed chunk: not a JSON object"
        return
    err = obj.get("error")
    if err is not None:
        msg = (err.get("message") or orjson.dumps(err).decode()) if isinstance(err, dict) else err
        acc.error = one_line(str(msg))
        return
    usage = obj.get("usage")
    choices = obj.get("choices")
    if choices:
        choice = choices[0]
        delta = choice.get("delta")
        reasoning = None
        if delta is not None:
            text = delta.get("content")
            if not text:
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        else:
            text = choice.get("text")
        if text or reasoning:
            acc.chunk_ns.append(now_ns)
            if reasoning:
                acc.reasoning_chunks += 1
                acc.pending_text.append(reasoning)
            else:
                acc.pending_text.append(text)
            n = 1
            if acc.tokens_known:
                completion = usage.get("completion_tokens") if usage else None
                if completion is None:
                    acc.tokens_known = False
                else:
                    n = completion - acc.last_completion_tokens
                    acc.last_completion_tokens = completion
                    acc.chunk_tokens.append(n)
            acc.tokens += n
        finish = choice.get("finish_reason")
        if finish:
            acc.finish_reason = finish
    if usage:
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        if prompt is not None:
            acc.usage_prompt = prompt
        if completion is not None:
            acc.usage_completion = completion
