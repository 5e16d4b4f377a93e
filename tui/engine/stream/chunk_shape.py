"""A stream's chunks differ only in their text: where it sits, proven once, so later reads decode just that.

A server writes every chunk of one answer from the same template (the same id, model, created time and
field order; only the text changes). Once one read, parsed in full, shows where its text lies in its bytes,
and a probe parse proves that position is the text (``choices[0].delta.content``, or a completion's
``choices[0].text``) and nothing else, a later read with the same bytes before and after that string token
holds the same chunk with other text: one small ``orjson.loads`` of the string replaces the SSE split, the
whole-chunk parse and the walk of its fields.
Anything else (another shape, a second line, usage, a finish, bytes that do not decode) takes the full path.
"""

from __future__ import annotations

from typing import Any

import orjson

_PROBE = "\x01probe"
_PROBE_TOKEN = orjson.dumps(_PROBE)


class ChunkShape:
    """The bytes around the text of one stream's content chunks (a read is ``prefix`` + string + ``suffix``,
    the string's quotes inside both), and how long such a read may be."""

    __slots__ = ("back", "cut", "max_bytes", "prefix", "suffix")

    def __init__(self, prefix: bytes, suffix: bytes, max_bytes: int) -> None:
        self.prefix = prefix
        """``data: `` and the chunk's JSON up to and including the text's opening quote."""
        self.suffix = suffix
        """From the text's closing quote to the blank line that ends the event."""
        self.max_bytes = max_bytes
        """The SSE decoder's line cap: a longer read takes the full path, which fails it as oversized."""
        self.cut = len(prefix) - 1
        """Where the string token starts in a read of this shape."""
        self.back = len(suffix) - 1
        """How far from a read's end the string token ends."""


def learn_shape(read: bytes, text: str, max_bytes: int) -> ChunkShape | None:
    """The shape of ``read``, a whole single-line ``data:`` event that the full path applied as one answer
    chunk with ``text``; None unless the text's place is proven and the chunk says nothing else (no usage,
    no finish, no reasoning, no error), so that the same bytes around other text mean only that text."""
    if not (
        read.startswith(b"data: ")
        and read.endswith(b"\n\n")
        and read.count(b"\n") == 2
        and b"\r" not in read
        and len(read) <= max_bytes
    ):
        return None
    token = orjson.dumps(text)
    if read.count(token) != 1:
        return None
    start = read.find(token)
    prefix, suffix = read[: start + 1], read[start + len(token) - 1 :]
    try:
        chunk = orjson.loads(read[6:-2])
        probe = orjson.loads(prefix[6:] + _PROBE_TOKEN[1:-1] + suffix[:-2])
    except orjson.JSONDecodeError:
        return None
    holder = _text_holder(chunk, text)
    if holder is None:
        return None
    holder[0][holder[1]] = _PROBE
    if probe != chunk:  # the string at that place is not the chunk's text, or not only it
        return None
    return ChunkShape(prefix, suffix, max_bytes)


def _text_holder(chunk: Any, text: str) -> tuple[dict[str, Any], str] | None:
    """Where `apply_chunk` finds ``text`` in ``chunk`` (a chat delta's ``content``, a completion's ``text``),
    if the chunk holds nothing more it would act on, even were its text empty (then reasoning would count)."""
    if type(chunk) is not dict or chunk.get("error") is not None or chunk.get("usage"):
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or not choices or type(choices[0]) is not dict:
        return None
    choice = choices[0]
    if choice.get("finish_reason"):
        return None
    delta = choice.get("delta")
    if delta is None:
        return (choice, "text") if choice.get("text") == text else None
    if (
        type(delta) is dict
        and delta.get("content") == text
        and not delta.get("reasoning_content")
        and not delta.get("reasoning")
    ):
        return delta, "content"
    return None
