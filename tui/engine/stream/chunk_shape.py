"""A stream's chunks differ only in their text: where it sits, proven once, so later reads decode just that.

A server writes every chunk of one answer from the same template (the same id, model, created time and
field order; only the text changes). Once one read, parsed in full, shows where its text lies in its bytes,
and a probe parse proves that position is the text and nothing else, a later read with the same bytes
before and after that string token holds the same chunk with other text: one small ``orjson.loads`` of the
string replaces the SSE split, the whole-chunk parse and the walk of its fields.

The text is where each API's applier reads it: a chat delta's ``content``, a completion's ``text``, a
Responses ``response.output_text.delta``'s ``delta``, a Messages ``text_delta``'s ``text`` (the last two
after their ``event:`` line, part of the shape). A Responses event also counts itself (``sequence_number``,
after the text, which no applier reads): its digits may change between reads of one shape.
Anything else (another shape, a second event, usage, a finish, bytes that do not decode) takes the full path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from tui.engine.stream.apis import apply_messages_event, apply_responses_event

_PROBE = "\x01probe"
_PROBE_TOKEN = orjson.dumps(_PROBE)
_COUNTER = b'"sequence_number":'
"""The one field a shape lets vary besides the text: a Responses event's count of itself."""
_PROBE_COUNT = 918_273


class ChunkShape:
    """The bytes around the text of one stream's content chunks (a read is ``prefix`` + string + ``suffix``,
    the string's quotes inside both), and how long such a read may be."""

    __slots__ = ("back", "counter", "cut", "max_bytes", "prefix", "suffix")

    def __init__(self, prefix: bytes, suffix: bytes, max_bytes: int, counter: bytes | None = None) -> None:
        self.prefix = prefix
        """The event's head (``data: ``, after an ``event:`` line if any) and its JSON up to and including
        the text's opening quote."""
        self.suffix = suffix
        """From the text's closing quote to the blank line that ends the event; with a ``counter``, from
        after the counter's digits."""
        self.max_bytes = max_bytes
        """The SSE decoder's line cap: a longer read takes the full path, which fails it as oversized."""
        self.cut = len(prefix) - 1
        """Where the string token starts in a read of this shape."""
        self.back = len(suffix) - 1
        """How far from a read's end the string token ends (without a ``counter``)."""
        self.counter = counter
        """From the text's closing quote to the counter's digits, or None: no counter."""

    def token(self, read: bytes) -> bytes:
        """The string token of ``read`` (which starts with ``prefix`` and ends with ``suffix``): b"" (no JSON)
        unless the counter's digits, a JSON integer, are all that lie between it and ``suffix``."""
        counter = self.counter
        if counter is None:
            return read[self.cut : len(read) - self.back]
        tail = len(read) - len(self.suffix)
        at = read.rfind(counter, self.cut, tail)
        digits = read[at + len(counter) : tail]
        if at < 0 or not digits.isdigit() or (digits[0] == 0x30 and len(digits) > 1):
            return b""
        return read[self.cut : at + 1]


Holder = Callable[[Any, str], "tuple[dict[str, Any], str] | None"]


def learn_shape(read: bytes, text: str, max_bytes: int, holder: Holder | None = None) -> ChunkShape | None:
    """The shape of ``read``, a whole single event (one ``data:`` line, after one ``event:`` line or none)
    that the full path applied as one answer chunk with ``text``; None unless the text's place is proven
    and the event says nothing else (no usage, no finish, no reasoning, no error), so that the same bytes
    around other text mean only that text. ``holder``: where the API's applier finds the text
    (`text_holder`, chat and completions by default)."""
    head = read.find(b"data: ")
    if not (
        (
            head == 0
            or (read.startswith(b"event: ") and read.count(b"\n", 0, head) == 1 and read[head - 1] == 10)
        )
        and read.endswith(b"\n\n")
        and read.count(b"\n") == 2 + (head > 0)
        and b"\r" not in read
        and len(read) <= max_bytes
    ):
        return None
    token = orjson.dumps(text)
    if read.count(token) != 1:
        return None
    start = read.find(token)
    prefix, suffix = read[: start + 1], read[start + len(token) - 1 :]
    body = head + 6
    counter, after = _counter(suffix)
    probe_suffix = suffix if counter is None else counter + b"%d" % _PROBE_COUNT + after
    try:
        chunk = orjson.loads(read[body:-2])
        probe = orjson.loads(prefix[body:] + _PROBE_TOKEN[1:-1] + probe_suffix[:-2])
    except orjson.JSONDecodeError:
        return None
    found = (holder or _text_holder)(chunk, text)
    if found is None:
        return None
    found[0][found[1]] = _PROBE
    if counter is not None:  # the digits are the count and nothing else
        if type(chunk) is not dict or type(chunk.get("sequence_number")) is not int:
            return None
        chunk["sequence_number"] = _PROBE_COUNT
    if probe != chunk:  # the string at that place is not the chunk's text, or not only it
        return None
    return ChunkShape(prefix, suffix if counter is None else after, max_bytes, counter)


def _counter(suffix: bytes) -> tuple[bytes | None, bytes]:
    """The suffix cut around a counter's digits (up to them, after them), or (None, suffix) without one."""
    at = suffix.find(_COUNTER)
    if at < 0:
        return None, suffix
    end = start = at + len(_COUNTER)
    while end < len(suffix) and 0x30 <= suffix[end] <= 0x39:
        end += 1
    if end == start:
        return None, suffix
    return suffix[:start], suffix[end:]


def text_holder(apply: Callable[..., Any]) -> Holder:
    """Where an API's event applier (`tui.engine.stream.failures.event_applier`) reads a chunk's text."""
    return _HOLDERS.get(apply, _text_holder)


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


def _responses_holder(event: Any, text: str) -> tuple[dict[str, Any], str] | None:
    """Where `apply_responses_event` finds answer text: an ``output_text`` delta's ``delta``."""
    if (
        type(event) is dict
        and event.get("type") == "response.output_text.delta"
        and event.get("delta") == text
    ):
        return event, "delta"
    return None


def _messages_holder(event: Any, text: str) -> tuple[dict[str, Any], str] | None:
    """Where `apply_messages_event` finds answer text: a ``content_block_delta``'s ``text_delta``."""
    if type(event) is not dict or event.get("type") != "content_block_delta":
        return None
    delta = event.get("delta")
    if type(delta) is dict and delta.get("type") == "text_delta" and delta.get("text") == text:
        return delta, "text"
    return None


_HOLDERS: dict[Callable[..., Any], Holder] = {
    apply_responses_event: _responses_holder,
    apply_messages_event: _messages_holder,
}
