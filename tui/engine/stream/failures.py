"""What one streaming attempt can end in, and the per-event rule, shared by both ways of carrying a stream.

The httpx path (`tui.engine.stream.client`) and the protocol path (`tui.engine.stream.protocol_request`)
raise the same exceptions from the same bytes, so a request's record does not depend on which carried it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import orjson

from tui.engine.stream.apis import apply_embeddings_body, apply_messages_event, apply_responses_event
from tui.engine.stream.openai import (
    StreamAccumulator,
    apply_chunk,
    error_message,
    one_line,
    rejects_fixed_osl_fields,
)
from tui.engine.stream.retry_after import parse_retry_after

EventApplier = Callable[[StreamAccumulator, Any, int], "bool | None"]
"""Folds one parsed event into the accumulator; True when it completes the stream."""


def event_applier(api: str) -> EventApplier:
    """How the API's stream events are read."""
    return {"responses": apply_responses_event, "messages": apply_messages_event}.get(api, apply_chunk)


_STREAM_ENDS: dict[EventApplier, str] = {
    apply_responses_event: "response.completed",
    apply_messages_event: "message_stop",
}
"""The event that ends each API's stream ([DONE] for chat and completions)."""


class Session(Protocol):
    """What naming a failure needs of `tui.engine.stream.client.RequestSession`."""

    fixed_osl_fields: bool
    notice: Callable[[str], None]
    apply_event: EventApplier
    """How this session's API's events are read."""
    whole_answer: bool
    """The API answers in one JSON body, not a stream (embeddings)."""

    def scrub(self, text: str) -> str: ...


MAX_SKIPPED_LINES = 16
"""Malformed data lines skipped in one stream before it fails as `malformed`."""
ERROR_BODY_LIMIT = 4096
"""Bytes of an error or non-stream body read to name what went wrong."""
WHOLE_ANSWER_LIMIT = 64 << 20
"""Bytes of a whole (unstreamed) answer: an embedding is tens of KB, a batch of them a few MB."""


class Failure(Exception):
    """The request failed: its error class, one-line message and what the server said."""

    def __init__(
        self,
        error_class: str,
        message: str,
        http_status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.message = message
        self.http_status = http_status
        self.retry_after_s = retry_after_s


class RetryFresh(Exception):
    """The request failed before any response byte on what was probably a stale keep-alive connection."""


class RetryWithoutFixedOsl(Exception):
    """The server rejected ignore_eos/min_tokens: send the request again without them."""


def stall_message(chunks: int, silent_s: float) -> str:
    return f"stream stalled after {chunks} chunk{'s' if chunks != 1 else ''}: no data for {silent_s:.1f} s"


def handle_event(
    event: str,
    data: str,
    acc: StreamAccumulator,
    now: int,
    loads: Callable[[str], Any],
    apply: EventApplier = apply_chunk,
) -> bool:
    """Apply one event with the API's ``apply``; True when the stream is complete."""
    if data == "[DONE]":
        acc.done = True
        return True
    if event == "error":
        raise Failure("stream_error", "stream error: " + error_message(data.encode()))
    try:
        obj = loads(data)
    except orjson.JSONDecodeError:
        # One bad line (a proxy's keep-alive comment without its colon, a cut chunk) costs that line, not
        # the stream: skipped and counted. A stream of nothing but bad lines still fails, once the cap says
        # it is not a glitch.
        acc.skipped_lines += 1
        if acc.skipped_lines > MAX_SKIPPED_LINES:
            raise Failure(
                "malformed", f"more than {MAX_SKIPPED_LINES} malformed lines, last: " + one_line(data, 80)
            ) from None
        return False
    complete = apply(acc, obj, now)
    if acc.error is not None:
        raise Failure("stream_error", "stream error: " + acc.error)
    return bool(complete)


def ended_early(chunks: int, apply: EventApplier) -> Failure:
    """The body ended cleanly but the stream did not: how far it got, and the event it ended before."""
    end = _STREAM_ENDS.get(apply, "[DONE]")
    return Failure(
        "disconnect", f"stream ended after {chunks} chunk{'s' if chunks != 1 else ''}, before {end}"
    )


def finish_whole_answer(acc: StreamAccumulator, body: bytes) -> None:
    """Read a whole answer (embeddings) into ``acc``; raises its `Failure` when it is none."""
    if len(body) > WHOLE_ANSWER_LIMIT:
        raise Failure("oversized", f"answer over {WHOLE_ANSWER_LIMIT:,} bytes")
    kind = apply_embeddings_body(acc, body)
    if kind is not None:
        raise Failure(kind, acc.error or kind)


def http_failure(
    session: Session, status: int, headers: Mapping[str, str], body: bytes, sent_fixed_osl: bool
) -> Exception:
    """The failure for an HTTP error status; or `RetryWithoutFixedOsl` when this request carried the
    fixed-OSL fields and the server rejected them (``sent_fixed_osl``: what this request sent, not the
    session's flag now: with several in flight, another one's 400 may have switched the flag already)."""
    text = body.decode("utf-8", "replace")
    if sent_fixed_osl and rejects_fixed_osl_fields(status, text):
        if session.fixed_osl_fields:  # the first such 400 of the run says so, once
            session.fixed_osl_fields = False
            session.notice(
                f"server rejected ignore_eos/min_tokens (HTTP {status}); sending without them, "
                "so output lengths may vary"
            )
        return RetryWithoutFixedOsl()
    # masked before error_message cuts it: a key cut in half would leak its first characters
    message = f"HTTP {status}: {error_message(session.scrub(text).encode())}"
    retry_after = headers.get("retry-after")
    if retry_after:
        message += f" (Retry-After {retry_after})"
    kind = "http_429" if status == 429 else "http_5xx" if status >= 500 else "http_4xx"
    return Failure(kind, message, status, parse_retry_after(retry_after))


def not_sse_failure(session: Session, content_type: str, body: bytes) -> Failure:
    """A success answered with something other than an event stream (a JSON completion from a server or
    proxy that ignored ``stream: true``, an HTML login page, ...): class `not_sse`, naming the content type
    and the start of the body. Read as a stream it would only have looked like a disconnect."""
    text = session.scrub(body.decode("utf-8", "replace"))  # masked before it is cut
    kind = content_type.split(";")[0].strip().lower()
    what = kind
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if (
        isinstance(obj, dict)
        and "choices" in obj
        and obj.get("object") in ("chat.completion", "text_completion")
    ):
        what = f"a non-streamed completion ({kind}; the server ignored stream: true)"
    return Failure("not_sse", f"expected an event stream, got {what}: {one_line(text, 80)}")


def redirect_failure(status: int, location: str | None) -> Failure:
    """A redirect is not followed for a stream (the request would be sent twice, its timing from the
    second): class `not_sse`, naming where it pointed, so the user can give that URL instead."""
    where = f" to {one_line(location, 120)}" if location else ""
    return Failure(
        "not_sse", f"HTTP {status} redirect{where}: not followed for a stream; give the final URL", status
    )


def is_event_stream(content_type: str) -> bool:
    """An absent content type is taken as a stream, as servers that omit it mean one."""
    return not content_type or content_type.lower().startswith("text/event-stream")
