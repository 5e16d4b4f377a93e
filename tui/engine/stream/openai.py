"""The OpenAI-compatible wire format: request bodies and what each streamed chunk means.

Kept free of I/O so it can be tested (and timed) alone; `tui.engine.stream.client` does the sending, and
`tui.engine.workload` decides what each request asks for.
"""

from __future__ import annotations

from array import array
from typing import Any

import orjson

from tui.engine.config import API_PATHS, MESSAGES_APIS, TargetConfig
from tui.engine.workload.protocol import RequestSpec

FIXED_OSL_FIELDS = ("ignore_eos", "min_tokens")
"""Non-standard fields that pin the output length (vLLM, SGLang and the simulator accept them)."""


_MAX_TOKENS_FIELD = {"responses": "max_output_tokens"}
"""The field that caps the output, where an API does not call it ``max_tokens``."""


def build_body(
    target: TargetConfig,
    model: str,
    spec: RequestSpec,
    *,
    fixed_osl_fields: bool = True,
) -> bytes:
    """The JSON body of one request for the target's API. The spec's per-request fields come after
    tokentop's own, and ``--extra-body`` fields last (they win over both).

    Knows nothing about how prompts are made: that is the workload's (`tui.engine.workload`).
    """
    api = target.endpoint
    body: dict[str, Any] = {"model": model}
    prompt_key = {"chat": "messages", "messages": "messages", "completions": "prompt"}.get(api, "input")
    if spec.messages is not None:
        if api not in MESSAGES_APIS:
            raise ValueError(f"this workload sends chat messages, which need the chat endpoint (not {api})")
        messages = [{"role": m.role, "content": m.content} for m in spec.messages]
        if api == "messages":  # Anthropic takes the system prompt apart from the turns
            system = [m["content"] for m in messages if m["role"] == "system"]
            messages = [m for m in messages if m["role"] != "system"]
            if system:
                body["system"] = "\n".join(system)
        body[prompt_key] = messages
    elif api in ("chat", "messages"):
        body[prompt_key] = [{"role": "user", "content": spec.prompt}]
    else:
        body[prompt_key] = spec.prompt
    if api == "embeddings":
        body["encoding_format"] = "float"
    else:
        body[_MAX_TOKENS_FIELD.get(api, "max_tokens")] = spec.max_tokens
        body["stream"] = True
        if api in ("chat", "completions"):
            body["stream_options"] = {"include_usage": True}
        if spec.fixed_osl and fixed_osl_fields:
            body["ignore_eos"] = True
            body["min_tokens"] = spec.max_tokens
    for key, value in spec.extra_fields:
        body[key] = value
    for key, value in target.extra_body:
        body[key] = value
    return orjson.dumps(body)


def endpoint_url(target: TargetConfig) -> str:
    """Where every request goes (the workers' and the ISL probe's): the target's own path, else the
    API's standard one."""
    if target.endpoint_path is not None:
        return target.base_url + target.endpoint_path
    return target.base_url + API_PATHS[target.endpoint]


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
        "first_answer_ns",
        "last_completion_tokens",
        "last_read_ns",
        "pending_reasoning",
        "pending_text",
        "reasoning_chunks",
        "reply",
        "retry_after_s",
        "skipped_lines",
        "tokens",
        "tokens_known",
        "usage_cached",
        "usage_completion",
        "usage_prompt",
        "usage_reasoning",
    )

    def __init__(self) -> None:
        self.chunk_ns: array[int] = array("q")
        self.chunk_tokens: array[int] = array("q")
        self.tokens_known = True
        """Every content chunk so far carried a cumulative usage count (continuous usage stats)."""
        self.last_completion_tokens = 0
        self.last_read_ns = 0
        """Arrival of the last body read (any bytes, keep-alive comments too): a stall is silence since it."""
        self.tokens = 0
        """Output tokens so far: known per-chunk counts, else one per content chunk."""
        self.reasoning_chunks = 0
        self.retry_after_s: float | None = None
        """A failed answer's ``Retry-After`` in seconds (the user that sent it waits that long)."""
        self.first_answer_ns: int | None = None
        """Arrival of the first chunk of answer text (not reasoning): time to first answer token."""
        self.pending_text: list[str] = []
        """Answer text not yet handed to the live lanes (the worker takes it every batch)."""
        self.pending_reasoning: list[str] = []
        """Reasoning text not yet handed to the live lanes, kept apart so they draw it apart."""
        self.reply: list[str] | None = None
        """The whole answer text (no reasoning), kept only when the workload asks to see it (set to a list
        before the request starts): a multi-turn conversation appends it to the user's history."""
        self.usage_prompt: int | None = None
        self.usage_completion: int | None = None
        self.usage_cached: int | None = None
        """Prompt tokens the server served from its prefix cache (``usage.prompt_tokens_details``)."""
        self.usage_reasoning: int | None = None
        """``usage.completion_tokens_details.reasoning_tokens``, where the server reports it."""
        self.finish_reason: str | None = None
        self.error: str | None = None
        """An ``error`` object seen inside the stream (one line)."""
        self.done = False
        """``[DONE]`` seen."""
        self.skipped_lines = 0
        """Data lines that were not JSON, skipped (the stream went on)."""


def apply_chunk(acc: StreamAccumulator, obj: Any, now_ns: int) -> None:
    """Fold one parsed chunk (chat or completions) into ``acc``.

    Handles: a role-only first delta (no content: not a content chunk), ``content``, ``reasoning_content`` /
    ``reasoning`` deltas (vLLM has used both names; the first generated chunk of either kind is TTFT, the
    first ``content`` one the time to first answer token), completions ``text``, ``finish_reason``, a
    usage-only final chunk with empty ``choices``, per-chunk cumulative usage (continuous usage stats) with
    ``completion_tokens_details.reasoning_tokens``, and an ``error`` object.
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
                acc.pending_reasoning.append(reasoning)
            else:
                if acc.first_answer_ns is None:
                    acc.first_answer_ns = now_ns
                acc.pending_text.append(text)
                if acc.reply is not None:
                    acc.reply.append(text)
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
        # prefix caching: vLLM, SGLang and OpenAI report cached prompt tokens here
        details = usage.get("prompt_tokens_details")
        if type(details) is dict:
            cached = details.get("cached_tokens")
            if type(cached) is int:
                acc.usage_cached = cached
        details = usage.get("completion_tokens_details")
        if type(details) is dict:
            reasoning_tokens = details.get("reasoning_tokens")
            if isinstance(reasoning_tokens, int):
                acc.usage_reasoning = reasoning_tokens
