"""JSON Lines datasets: one object per line, ``{"prompt": "..."}`` or a chat ``{"messages": [...]}``, with an
optional output length per line (``output_tokens``, ``max_tokens`` or ``osl``). Blank lines are skipped."""

from __future__ import annotations

from typing import Any

import orjson

from tui.engine.workload.entries import DatasetError, Entry
from tui.engine.workload.protocol import Message, Role

ROLES: tuple[Role, ...] = ("system", "user", "assistant")
OUTPUT_KEYS = ("output_tokens", "max_tokens", "osl")
"""Where a line may give its output length, first found wins."""


def parse_jsonl(path: str, data: bytes) -> list[Entry]:
    """Every entry of a JSONL file whose bytes are ``data``; `DatasetError` names the first bad line."""
    out: list[Entry] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise DatasetError(
                path, f"not valid JSON ({exc.msg}); is it --dataset-format text?", number
            ) from None
        out.append(jsonl_entry(path, number, obj))
    return out


def jsonl_entry(path: str, number: int, obj: Any) -> Entry:
    """One line's object as an entry."""

    def bad(message: str) -> DatasetError:
        return DatasetError(path, message, number)

    if not isinstance(obj, dict):
        raise bad('not a JSON object (want {"prompt": ...} or {"messages": [...]})')
    output = None
    for k in OUTPUT_KEYS:
        if k in obj:
            output = obj[k]
            if type(output) is not int or output < 1:
                raise bad(f'"{k}" must be a whole number of at least 1, got {orjson.dumps(output).decode()}')
            break
    if "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise bad('"prompt" must be a non-empty string')
        return Entry(prompt=prompt, output_tokens=output)
    if "messages" in obj:
        return Entry(messages=chat_messages(obj["messages"], bad), output_tokens=output)
    raise bad('has neither "prompt" nor "messages"')


def chat_messages(value: Any, bad: Any) -> tuple[Message, ...]:
    """A non-empty list of ``{"role", "content"}`` objects as messages; ``bad(message)`` makes the error."""
    if not isinstance(value, list) or not value:
        raise bad('"messages" must be a non-empty list')
    messages = []
    for i, m in enumerate(value, 1):
        if not isinstance(m, dict):
            raise bad(f"message {i} is not an object")
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise bad(
                f"message {i}: role must be one of {', '.join(ROLES)}, got {orjson.dumps(role).decode()}"
            )
        if not isinstance(content, str):
            raise bad(f'message {i}: "content" must be a string')
        messages.append(Message(role, content))
    return tuple(messages)
