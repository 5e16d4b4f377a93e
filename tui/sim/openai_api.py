"""The OpenAI API surface: requests validated into `GenParams`, OpenAI-shaped errors, chunk templates.

Prompt tokens are counted by `tui.sim.tokens.count_prompt_tokens` (short words one token, long words several,
punctuation its own) plus a chat template (`tui.sim.tokens.chat_prompt_tokens`): not one token per word, so a
client must learn its ISL from `usage`, as on a real server. An answer stops at
`max_completion_tokens`/`max_tokens` (default: what fits in `max_model_len`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from tui.sim.perf_model import Profile
from tui.sim.prefix_cache import block_hashes
from tui.sim.tokens import chat_units, text_units

PLACEHOLDER = "@@tokentop-sim@@"
_PLACEHOLDER_JSON = orjson.dumps(PLACEHOLDER)


class HttpError(Exception):
    """An error answered in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`, or in
    Anthropic's (`{"type": "error", "error": {"type", "message"}}`) once `anthropic` is set."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.param = param
        self.headers = headers
        self.anthropic = False
        """Answer in the Messages API's shape (set where a Messages request failed)."""

    def body(self) -> bytes:
        if self.anthropic:
            return orjson.dumps({"type": "error", "error": {"type": self.type, "message": self.message}})
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return orjson.dumps({"error": error})


API_PATHS = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
    "/v1/embeddings": "embeddings",
}
"""The generating paths and the API each serves."""


def split_template(obj: dict[str, Any], event: str | None = None) -> tuple[bytes, bytes]:
    """orjson-dump `obj` (which holds PLACEHOLDER once) and split it around the placeholder; ``event``:
    the SSE event name the line carries (Responses and Messages name every event)."""
    before, _, after = orjson.dumps(obj).partition(_PLACEHOLDER_JSON)
    head = b"event: %s\ndata: " % event.encode() if event else b"data: "
    return head + before, after + b"\n\n"


def _content_text(content: object, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif not isinstance(part, dict):
                raise HttpError(400, f"{where} content parts must be objects", param="messages")
        return " ".join(parts)
    raise HttpError(400, f"{where} content must be a string, a list of parts or null", param="messages")


def _int_field(obj: dict[str, Any], name: str, *, minimum: int) -> int | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise HttpError(400, f"{name} must be an integer", param=name)
    if value < minimum:
        raise HttpError(400, f"{name} must be at least {minimum}, got {value}", param=name)
    return value


def _bool_field(obj: dict[str, Any], name: str) -> bool:
    value = obj.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise HttpError(400, f"{name} must be a boolean", param=name)
    return value


@dataclass
class GenParams:
    """A validated generation request."""

    chat: bool
    """Chat-templated (chat, Responses, Messages): reasoning applies."""
    prompt_tokens: int
    max_tokens: int
    """The cap on completion tokens (asked for, or what fits in max_model_len)."""
    stream: bool
    include_usage: bool
    ignore_eos: bool
    min_tokens: int
    seed: int | None
    prompt_blocks: tuple[int, ...] = ()
    """The prompt's block hashes for the prefix cache (`tui.sim.prefix_cache`); empty when not asked for."""
    api: str = "chat"
    """Which API asked (`API_PATHS`): it shapes the answer."""


def _messages_units(obj: dict[str, Any], key: str) -> list[str]:
    messages = obj.get(key)
    if not isinstance(messages, list) or not messages:
        raise HttpError(400, f"{key} is required and must be a non-empty list", param=key)
    contents: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise HttpError(400, f"{key}[{i}] must be an object with a role", param=key)
        contents.append(_content_text(message.get("content"), f"{key}[{i}]"))
    system = obj.get("system")
    if isinstance(system, str) and key == "messages":
        contents.insert(0, system)
    return chat_units(contents)


def _prompt_units(api: str, obj: dict[str, Any]) -> list[str]:
    """The prompt's tokens, where the API puts the prompt."""
    if api in ("chat", "messages"):
        return _messages_units(obj, "messages")
    if api == "responses":
        if isinstance(obj.get("input"), str):
            return chat_units([obj["input"]])
        return _messages_units(obj, "input")
    key = "input" if api == "embeddings" else "prompt"
    prompt = obj.get(key)
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return text_units(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return [str(t) for t in prompt]  # token ids
    raise HttpError(400, f"{key} is required: a string, or one list of token ids", param=key)


def parse_generation(api: str, body: bytes, profile: Profile, *, blocks: bool = False) -> GenParams:
    """Validate a body of one of the `API_PATHS`; HttpError (400/404) with OpenAI's message style
    otherwise. ``blocks``: also hash the prompt's blocks for the prefix cache."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise HttpError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise HttpError(400, "request body must be a JSON object")
    model = obj.get("model")
    if model is not None and model != profile.model:
        raise HttpError(404, f"The model `{model}` does not exist.", code="model_not_found", param="model")
    units = _prompt_units(api, obj)
    prompt_tokens = max(1, len(units))
    if obj.get("n", 1) not in (1, None):
        raise HttpError(400, "only n=1 is supported", param="n")
    if api == "embeddings":  # one engine step: the prefill
        return GenParams(
            chat=False,
            prompt_tokens=prompt_tokens,
            max_tokens=1,
            stream=False,
            include_usage=True,
            ignore_eos=True,
            min_tokens=0,
            seed=None,
            prompt_blocks=tuple(block_hashes(units)) if blocks else (),
            api=api,
        )
    if api == "responses":
        max_tokens = _int_field(obj, "max_output_tokens", minimum=1)
    else:
        max_tokens = _int_field(obj, "max_completion_tokens", minimum=1)
        if max_tokens is None:
            max_tokens = _int_field(obj, "max_tokens", minimum=1)
        if max_tokens is None and api == "messages":
            raise HttpError(400, "max_tokens: Field required", param="max_tokens")
    limit = profile.max_model_len - prompt_tokens
    if max_tokens is None:
        max_tokens = limit
    if limit < 1 or max_tokens > limit:
        raise HttpError(
            400,
            f"This model's maximum context length is {profile.max_model_len} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the prompt, {max_tokens} in the "
            "completion). Please reduce the length of the prompt or completion.",
            code="context_length_exceeded",
            param="max_tokens",
        )
    stream = _bool_field(obj, "stream")
    options = obj.get("stream_options")
    include_usage = api in ("responses", "messages")  # their streams always carry usage
    if options is not None:
        if not isinstance(options, dict):
            raise HttpError(400, "stream_options must be an object", param="stream_options")
        if not stream:
            raise HttpError(400, "stream_options is only allowed when stream is true", param="stream_options")
        include_usage = _bool_field(options, "include_usage")
    min_tokens = _int_field(obj, "min_tokens", minimum=0) or 0
    if min_tokens > max_tokens:
        raise HttpError(
            400, f"min_tokens ({min_tokens}) exceeds max_tokens ({max_tokens})", param="min_tokens"
        )
    seed = obj.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise HttpError(400, "seed must be an integer", param="seed")
    return GenParams(
        chat=api != "completions",
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=include_usage,
        ignore_eos=_bool_field(obj, "ignore_eos"),
        min_tokens=min_tokens,
        seed=seed,
        prompt_blocks=tuple(block_hashes(units)) if blocks else (),
        api=api,
    )
