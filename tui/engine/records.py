"""One finished request, as measured at the socket, and its forms on the wire and in the requests log.

Every time is a `time.perf_counter_ns()` stamp (CLOCK_MONOTONIC on Linux, so stamps taken in the engine
worker processes, the face's process and the simulator compare directly). Metrics are derived later, from
these raw stamps, by `tui.engine.aggregate.metrics`.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import IO, Any, Literal

import orjson

Status = Literal["ok", "error", "cancelled"]
TokenSource = Literal["usage", "chunks", "estimate"]

ERROR_CLASSES: tuple[str, ...] = (
    "connect",
    "tls",
    "http_4xx",
    "http_429",
    "http_5xx",
    "timeout",
    "stall",
    "disconnect",
    "malformed",
    "oversized",
    "stream_error",
    "not_sse",
    "cancelled",
    "client",
)
"""Every `error_class` a record can carry. `connect`: no connection (refused, unreachable, connect timeout,
or a host name that does not resolve: "cannot resolve host NAME"); `tls`: the TLS handshake failed (a
certificate that does not verify says so, and how to trust it); `timeout`: no output within the timeout, or
the whole request ran past it while still sending; `stall`: the stream had sent output, then went silent for
at least half the timeout (or past the per-read silence limit); `disconnect`: the connection broke or the
stream ended early; `malformed`: a chunk that is not valid JSON; `oversized`: an SSE line or event past the
decoder's cap; `stream_error`: an `error` object inside the stream; `not_sse`: a success whose content type
is not ``text/event-stream`` where a stream was asked (a JSON completion from a server that ignored
``stream: true``, a proxy's HTML page); `client`: a bug or local failure in tokentop itself."""


@dataclass(slots=True)
class RequestRecord:
    """Raw measurements of one request. Finished records are immutable by convention."""

    request_id: int
    """Unique in a run: ``seq * workers + worker + 1``."""
    worker: int
    seq: int
    """Per-worker sequence number; the request carries ``x-tokentop-request-id: <worker>-<seq>``."""
    level_id: int
    """The load level the request was started under."""
    sent_ns: int
    """When the request went onto the socket: the protocol transport stamps it just before the socket write,
    the aiohttp transport as the request headers are written, the stock httpx transport just before
    handing the request to httpx. A retry restamps it."""
    scheduled_ns: int | None = None
    """Open loop: when the arrival process scheduled it (``sent_ns - scheduled_ns`` is scheduling lag)."""
    first_byte_ns: int | None = None
    """Response headers received."""
    first_content_ns: int | None = None
    """First chunk carrying generated text (content or reasoning)."""
    end_ns: int = 0
    """Stream finished (``[DONE]``, end of body) or the request failed."""
    chunk_ns: array[int] = field(default_factory=lambda: array("q"))
    """Arrival of each chunk that carried generated text."""
    chunk_tokens: array[int] | None = None
    """Tokens in each of those chunks, when the server said (continuous usage); else None."""
    reasoning_chunks: int = 0
    """How many of the content chunks carried reasoning rather than answer text."""
    input_tokens: int | None = None
    input_source: TokenSource = "estimate"
    output_tokens: int | None = None
    output_source: TokenSource = "chunks"
    status: Status = "ok"
    error_class: str | None = None
    error: str | None = None
    """One line, never containing the API key."""
    http_status: int | None = None
    finish_reason: str | None = None
    retries: int = 0
    send_start_ns: int | None = None
    """Just before tokentop took a connection for the request (the protocol pool, or httpx's); for one held
    to its schedule with its connection ready, the end of the hold. ``sent_ns - send_start_ns`` is the
    client's own overhead on the request's way out (connection pool, a connect, headers), which TTFT does
    not include when the socket stamp exists."""
    cached_tokens: int | None = None
    """Prompt tokens the server served from its prefix cache (``usage.prompt_tokens_details.cached_tokens``);
    None when it did not say."""
    first_answer_ns: int | None = None
    """First chunk of answer text (``content``, not reasoning): equals `first_content_ns` for a model that
    does not reason."""
    reasoning_tokens: int | None = None
    """``usage.completion_tokens_details.reasoning_tokens`` where the server reports it (they count in
    `output_tokens` too); else None."""
    skipped_lines: int = 0
    """Malformed data lines (not JSON) skipped in this stream, which went on (class `malformed` only when
    there were more than the client's cap)."""

    # --- derived ---------------------------------------------------------------------------------

    @property
    def client_request_id(self) -> str:
        """The id sent in ``x-tokentop-request-id`` (the simulator's truth log records it)."""
        return f"{self.worker}-{self.seq}"

    @property
    def ok(self) -> bool:
        """The request succeeded."""
        return self.status == "ok"

    @property
    def ttft_ns(self) -> int | None:
        """First content chunk minus sent, or None without content."""
        return None if self.first_content_ns is None else self.first_content_ns - self.sent_ns

    @property
    def ttfa_ns(self) -> int | None:
        """Time to first answer token: first answer chunk minus sent, or None without answer text. After TTFT
        by the reasoning phase on a reasoning model, equal to it otherwise."""
        return None if self.first_answer_ns is None else self.first_answer_ns - self.sent_ns

    @property
    def e2e_ns(self) -> int:
        """End minus sent."""
        return self.end_ns - self.sent_ns

    # --- wire form (worker -> handle) ------------------------------------------------------------

    def __reduce__(self) -> tuple[type[RequestRecord], tuple[Any, ...]]:
        """Pickle as the class and its fields in one tuple (arrays pickle as raw bytes): as cheap as a plain
        tuple, where a slotted dataclass's default pickles a dict of slot names per record."""
        return (RequestRecord, record_fields(self))

    # --- requests log ----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The requests-log form: raw stamps (ns, same clock as the simulator's truth log) plus a few
        derived figures in ms for people reading the file."""
        ttft = self.ttft_ns
        return {
            "id": self.request_id,
            "client_request_id": self.client_request_id,
            "level": self.level_id,
            "status": self.status,
            "error_class": self.error_class,
            "error": self.error,
            "http_status": self.http_status,
            "finish_reason": self.finish_reason,
            "retries": self.retries,
            "skipped_lines": self.skipped_lines,
            "scheduled_ns": self.scheduled_ns,
            "send_start_ns": self.send_start_ns,
            "sent_ns": self.sent_ns,
            "first_byte_ns": self.first_byte_ns,
            "first_content_ns": self.first_content_ns,
            "end_ns": self.end_ns,
            "input_tokens": self.input_tokens,
            "input_source": self.input_source,
            "output_tokens": self.output_tokens,
            "output_source": self.output_source,
            "reasoning_chunks": self.reasoning_chunks,
            "cached_tokens": self.cached_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "first_answer_ns": self.first_answer_ns,
            "ttft_ms": None if ttft is None else ttft / 1e6,
            "ttfa_ms": None if self.first_answer_ns is None else (self.first_answer_ns - self.sent_ns) / 1e6,
            "e2e_ms": self.e2e_ns / 1e6,
            "chunk_ns": self.chunk_ns.tolist(),
            "chunk_tokens": None if self.chunk_tokens is None else self.chunk_tokens.tolist(),
        }


record_fields: Callable[[RequestRecord], tuple[Any, ...]] = attrgetter(
    *(f.name for f in fields(RequestRecord))
)
"""Every field of a record in `__init__` order, as one tuple (one C call): ``RequestRecord(*fields)``
rebuilds it."""


class RequestsLog:
    """Appends one JSON line per finished request, flushed per line so a crash loses nothing finished."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def write(self, record: RequestRecord) -> None:
        """Append ``record`` as one line and flush."""
        self.write_json(record.to_json())

    def write_json(self, line: dict[str, Any]) -> None:
        """Append one line as given (a record's `to_json` with a mark added) and flush."""
        self._stream.write(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
        self._stream.flush()

    def close(self) -> None:
        """Close the file."""
        self._stream.close()
