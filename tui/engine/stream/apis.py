"""The APIs besides OpenAI chat and completions: OpenAI Responses, Anthropic Messages and embeddings.

Each one's path, headers, body fields and events, free of I/O like `tui.engine.stream.openai`. An event
applier folds one parsed event into the `StreamAccumulator` and returns True when the stream is complete;
an error event raises nothing here but sets ``acc.error``, which the caller turns into the failure.
"""

from __future__ import annotations

from typing import Any

import orjson

from tui.engine.stream.openai import StreamAccumulator, one_line

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header every Messages request carries (the one the API and vLLM take)."""


def api_headers(api: str, api_key: str | None) -> dict[str, str]:
    """Headers the API needs beyond JSON and the event stream: Messages names its version and takes the key
    as ``x-api-key`` (sent with the bearer too, which vLLM and llama.cpp check); embeddings are JSON."""
    headers: dict[str, str] = {}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if api == "messages":
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if api_key:
            headers["x-api-key"] = api_key
    if api == "embeddings":
        headers["accept"] = "application/json"
    return headers


def _error_line(err: Any) -> str:
    if isinstance(err, dict):
        msg = err.get("message") or err.get("code") or orjson.dumps(err).decode()
        return one_line(str(msg))
    return one_line(str(err))


def _text(acc: StreamAccumulator, text: str, now: int, *, reasoning: bool) -> None:
    """One delta of generated text: a chunk of its kind (no per-chunk token counts in these APIs)."""
    acc.chunk_ns.append(now)
    acc.tokens_known = False
    acc.tokens += 1
    if reasoning:
        acc.reasoning_chunks += 1
        acc.pending_reasoning.append(text)
        return
    if acc.first_answer_ns is None:
        acc.first_answer_ns = now
    acc.pending_text.append(text)
    if acc.reply is not None:
        acc.reply.append(text)


_RESPONSES_REASONING = frozenset(
    (
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning.delta",  # vLLM before 0.11
    )
)


def apply_responses_event(acc: StreamAccumulator, obj: Any, now: int) -> bool:
    """One OpenAI Responses event: ``response.output_text.delta`` is answer text, the reasoning deltas
    reasoning; ``response.completed`` (or ``.incomplete``, at ``max_output_tokens``) ends the stream with
    ``usage.input_tokens``/``output_tokens``; ``error`` and ``response.failed`` are stream errors."""
    if type(obj) is not dict:
        acc.error = "malformed event: not a JSON object"
        return False
    kind = obj.get("type")
    if kind == "response.output_text.delta":
        delta = obj.get("delta")
        if delta:
            _text(acc, str(delta), now, reasoning=False)
    elif kind in _RESPONSES_REASONING:
        delta = obj.get("delta")
        if delta:
            _text(acc, str(delta), now, reasoning=True)
    elif kind in ("response.completed", "response.incomplete"):
        response = obj.get("response")
        response = response if type(response) is dict else {}
        _responses_usage(acc, response.get("usage"))
        details = response.get("incomplete_details")
        reason = details.get("reason") if type(details) is dict else None
        acc.finish_reason = str(reason or response.get("status") or "completed")
        acc.done = True
        return True
    elif kind == "response.failed":
        response = obj.get("response")
        err = response.get("error") if type(response) is dict else None
        acc.error = _error_line(err) if err else "response.failed"
    elif kind == "error":
        acc.error = _error_line(obj.get("error") or obj)
    return False


def _responses_usage(acc: StreamAccumulator, usage: Any) -> None:
    if type(usage) is not dict:
        return
    prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
    if type(prompt) is int:
        acc.usage_prompt = prompt
    if type(completion) is int:
        acc.usage_completion = completion
    details = usage.get("input_tokens_details")
    if type(details) is dict and type(details.get("cached_tokens")) is int:
        acc.usage_cached = details["cached_tokens"]
    details = usage.get("output_tokens_details")
    if type(details) is dict and type(details.get("reasoning_tokens")) is int:
        acc.usage_reasoning = details["reasoning_tokens"]


def apply_messages_event(acc: StreamAccumulator, obj: Any, now: int) -> bool:
    """One Anthropic Messages event: ``message_start`` carries the input usage, ``content_block_delta`` a
    ``text_delta`` (answer) or ``thinking_delta`` (reasoning), ``message_delta`` the stop reason and the
    output usage, ``message_stop`` ends the stream; an ``error`` event is a stream error."""
    if type(obj) is not dict:
        acc.error = "malformed event: not a JSON object"
        return False
    kind = obj.get("type")
    if kind == "content_block_delta":
        delta = obj.get("delta")
        if type(delta) is dict:
            if delta.get("type") == "thinking_delta":
                if text := delta.get("thinking"):
                    _text(acc, str(text), now, reasoning=True)
            elif text := delta.get("text"):
                _text(acc, str(text), now, reasoning=False)
    elif kind == "message_start":
        message = obj.get("message")
        usage = message.get("usage") if type(message) is dict else None
        if type(usage) is dict:
            _messages_input(acc, usage)
    elif kind == "message_delta":
        delta = obj.get("delta")
        if type(delta) is dict and delta.get("stop_reason"):
            acc.finish_reason = str(delta["stop_reason"])
        usage = obj.get("usage")
        if type(usage) is dict:
            if type(usage.get("output_tokens")) is int:
                acc.usage_completion = usage["output_tokens"]
            _messages_input(acc, usage)
    elif kind == "message_stop":
        acc.done = True
        if acc.finish_reason is None:
            acc.finish_reason = "end_turn"
        return True
    elif kind == "error":
        acc.error = _error_line(obj.get("error") or obj)
    return False


def _messages_input(acc: StreamAccumulator, usage: dict[str, Any]) -> None:
    """Anthropic counts cache reads apart from ``input_tokens``: the prompt is their sum."""
    prompt = usage.get("input_tokens")
    if type(prompt) is not int:
        return
    cached = usage.get("cache_read_input_tokens")
    created = usage.get("cache_creation_input_tokens")
    extra = (cached if type(cached) is int else 0) + (created if type(created) is int else 0)
    acc.usage_prompt = prompt + extra
    if type(cached) is int:
        acc.usage_cached = cached


def apply_embeddings_body(acc: StreamAccumulator, body: bytes) -> str | None:
    """A whole embeddings answer: ``usage.prompt_tokens`` is the ISL; no output text. Returns the failure's
    class (its line in ``acc.error``) when it is no answer: `malformed` (not JSON, no embeddings) or
    `stream_error` (an ``error`` object)."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        acc.error = "malformed answer: not JSON: " + one_line(body.decode("utf-8", "replace"), 80)
        return "malformed"
    if type(obj) is dict and obj.get("error") is not None:
        acc.error = "error in the answer: " + _error_line(obj["error"])
        return "stream_error"
    if type(obj) is not dict or type(obj.get("data")) is not list or not obj["data"]:
        acc.error = "malformed answer: no embeddings in data: " + one_line(
            body.decode("utf-8", "replace"), 80
        )
        return "malformed"
    usage = obj.get("usage")
    if type(usage) is dict and type(usage.get("prompt_tokens")) is int:
        acc.usage_prompt = usage["prompt_tokens"]
    acc.finish_reason = "stop"
    acc.done = True
    return None
