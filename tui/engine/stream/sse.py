"""Server-sent events decoded from bytes, with every line and event bounded.

Lines are split on CR, LF and CRLF only, *before* any text decoding, and each complete line is then decoded
as UTF-8. Splitting text instead (``str.splitlines``) would also break on U+2028, U+0085 and friends, which
are legal unescaped inside JSON strings; decoding each read instead would break a multi-byte character
that straddles two reads. Both happen in the wild, so the decoder keeps partial lines as bytes across
reads (and a trailing CR, in case the LF of a CRLF arrives in the next read).

A partial line is kept as a list of the reads that hold it and joined once, when its end arrives; the line
end is looked for only in the new bytes. Re-joining the whole partial line on every read made one 50 MB line
without a newline cost the square of its length (minutes of a full core, every other stream on the worker
stamped seconds late). The line and the event's data are also capped (`SSELineTooLong`, `SSEEventTooLarge`):
past the cap the decoder drops what it holds and raises, so one bad stream fails alone and memory stays
bounded.

Field handling follows the WHATWG event-stream rules that matter for LLM servers: ``data`` lines are
joined with ``\\n``, ``event`` names the event, comments (``:`` lines, used as keep-alives) and unknown
fields are ignored, and a blank line dispatches. ``id`` is kept; ``retry`` is ignored (we never reconnect).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

_BOM = b"\xef\xbb\xbf"

DEFAULT_MAX_LINE_BYTES = 1 << 20
"""1 MiB. A real chunk line is under a few KB (a vLLM chat chunk is about 250 bytes, one with top-20 logprobs
a few KB), so this leaves hundreds of times the headroom while keeping a broken or hostile server from
growing one stream's buffer without end."""
DEFAULT_MAX_EVENT_BYTES = 4 << 20
"""4 MiB of ``data`` per event: several data lines may make one event, but a server that never sends the
blank line that ends it must not grow the event without end either."""

_SMALL_PARTIAL_BYTES = 4096
"""A partial line up to this long is simply prepended to the next read (one small copy, then the fast path);
a longer one is kept in pieces and the line end looked for in new bytes only. Prepending costs at most this
many bytes per read, so a line's total cost stays linear in its length whatever the read sizes."""

_join = b"".join
"""The one place a partial line's pieces are joined (a seam, so a test can count joins and bytes joined)."""


class SSEEvent(NamedTuple):
    """One dispatched event: its name (``message`` unless the server said otherwise) and joined data."""

    event: str
    data: str
    id: str | None = None


class SSEDecoderError(Exception):
    """The stream cannot be decoded further; the request reading it should fail.

    ``events`` holds the events the failing read completed before the error, so a caller that keeps partial
    results can still count them. After the error the decoder holds nothing and raises it again if fed.
    """

    def __init__(self, limit_bytes: int, seen_bytes: int, events: Sequence[SSEEvent] = ()) -> None:
        super().__init__(limit_bytes, seen_bytes)
        self.limit_bytes = limit_bytes
        """The cap that was passed."""
        self.seen_bytes = seen_bytes
        """How many bytes had arrived when the cap was passed (the rest is never buffered)."""
        self.events = list(events)


class SSELineTooLong(SSEDecoderError):
    """One line (complete or still partial) is longer than the decoder's ``max_line_bytes``."""

    def __str__(self) -> str:
        return f"SSE line over {self.limit_bytes:,} bytes ({self.seen_bytes:,} seen without a line end)"


class SSEEventTooLarge(SSEDecoderError):
    """One event's ``data`` lines add up to more than the decoder's ``max_event_bytes``."""

    def __str__(self) -> str:
        return f"SSE event data over {self.limit_bytes:,} bytes ({self.seen_bytes:,} seen before dispatch)"


class SSEDecoder:
    """Incremental decoder: feed it whatever bytes arrive, get back the events they complete.

    ``max_line_bytes`` bounds one line and ``max_event_bytes`` one event's data (see the defaults for why
    those sizes); passing either raises a `SSEDecoderError` subclass from `feed` or `flush`.

    >>> d = SSEDecoder()
    >>> d.feed(b'data: {"a"')
    []
    >>> d.feed(b': 1}\\r\\n\\r\\n')
    [SSEEvent(event='message', data='{"a": 1}', id=None)]
    """

    __slots__ = (
        "_data",
        "_data_bytes",
        "_event",
        "_failed",
        "_last_id",
        "_max_event_bytes",
        "_max_line_bytes",
        "_partial_bytes",
        "_parts",
        "_skip_lf",
        "_started",
    )

    def __init__(
        self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    ) -> None:
        if not 0 < max_line_bytes <= max_event_bytes:
            # An event holds at least one line; this also lets a one-line event skip the event check.
            raise ValueError("need 0 < max_line_bytes <= max_event_bytes")
        self._max_line_bytes = max_line_bytes
        self._max_event_bytes = max_event_bytes
        self._parts: list[bytes] = []
        """The pieces of an incomplete last line, in order (none contains CR or LF), joined once it ends.
        While ``_partial_bytes <= _SMALL_PARTIAL_BYTES`` there is exactly one piece. Before the stream has
        started, the first bytes of what may be a BOM."""
        self._partial_bytes = 0
        """Total length of ``_parts``, kept so the cap check never has to walk them."""
        self._skip_lf = False
        """The previous read ended with CR: a leading LF in the next read completes that CRLF."""
        self._data: list[bytes] = []
        """The pending event's ``data`` values, still bytes: decoded once, at dispatch."""
        self._data_bytes = 0
        """Bytes in ``_data``, counted only once it holds two values (one alone is within the line cap)."""
        self._event = ""
        self._last_id: str | None = None
        self._started = False
        """A BOM has been looked for. Cleared again on failure, so `feed`'s rare branch re-raises."""
        self._failed: SSEDecoderError | None = None

    @property
    def max_line_bytes(self) -> int:
        """The line cap this decoder enforces."""
        return self._max_line_bytes

    @property
    def at_boundary(self) -> bool:
        """Between events with nothing held: a read that is one whole event starting ``data:`` now means only
        that event (before the first read too, as such a read starts with no BOM)."""
        return (
            not self._parts
            and not self._data
            and not self._skip_lf
            and not self._event
            and self._failed is None
        )

    @property
    def buffered_bytes(self) -> int:
        """Bytes the decoder holds between reads: the partial line plus the pending event's data."""
        return self._partial_bytes + sum(map(len, self._data))

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Add bytes from the stream; return the events completed by them, in order.

        Raises `SSELineTooLong` or `SSEEventTooLarge` as soon as a line or an event passes its cap.
        """
        if (
            chunk[:6] == b"data: "
            and chunk[-2:] == b"\n\n"
            and chunk.count(b"\n") == 2
            and b"\r" not in chunk
            and self._started
            and not self._parts
            and not self._data
            and not self._skip_lf
            and not self._event
            and len(chunk) <= self._max_line_bytes
        ):
            # The common read, one whole single-line event with nothing held: no line split needed.
            return [SSEEvent("message", chunk[6:-2].decode("utf-8", "replace"), self._last_id)]
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 10:  # the LF of a CRLF split across reads
                chunk = chunk[1:]
                if not chunk:
                    return []
        if not self._started:
            chunk = self._start(chunk)
            if not chunk:
                return []
        first = None
        if self._parts:
            if self._partial_bytes > _SMALL_PARTIAL_BYTES:
                first, chunk = self._end_long(chunk)
                if first is None:
                    return []
            else:
                # A short partial line is cheaper to prepend than to track; the copy is bounded.
                chunk = self._parts[0] + chunk
                self._parts = []
                self._partial_bytes = 0
        # bytes.splitlines breaks on \r, \n and \r\n only (unlike str.splitlines).
        lines = chunk.splitlines()
        if first is not None:
            lines[0] = first  # ``chunk`` starts at the long line's end, so splitlines gave it as b""
        last = chunk[-1]
        if last == 10 or last == 13:
            self._skip_lf = last == 13
            tail = b""
        else:
            tail = lines.pop()
        too_long = None
        if len(chunk) > self._max_line_bytes:  # only a read longer than the cap can hold a too-long line
            lines, tail, too_long = self._cut_too_long(lines, tail)
        events: list[SSEEvent] = []
        data = self._data
        for line in lines:  # the hot loop: kept flat
            if not line:
                if data:
                    payload = data[0] if len(data) == 1 else self._joined_data()
                    event = SSEEvent(
                        self._event or "message", payload.decode("utf-8", "replace"), self._last_id
                    )
                    events.append(event)
                    self._data = data = []
                self._event = ""
                continue
            if line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
                if data:
                    self._add_data(value, events)
                else:
                    data.append(value)
                continue
            self._field(line, events)
            data = self._data
        if too_long is not None:
            too_long.events = events
            self._fail(too_long)
        if tail:
            # Within the cap, as the whole read is; nothing else is held now.
            self._parts.append(tail)
            self._partial_bytes = len(tail)
        return events

    def flush(self) -> list[SSEEvent]:
        """At end of stream: return an event left without its closing blank line, if any.

        The standard says to drop it; some servers end the stream right after the last ``data:`` line, and
        losing their final chunk (often the usage) would be worse than accepting it. Two LFs end whatever
        line is partial (an LF just after a CR is skipped as the rest of a CRLF) and dispatch.
        """
        return self.feed(b"\n\n")

    def _start(self, chunk: bytes) -> bytes:
        """Strip a leading BOM (which may arrive a byte at a time); ``b""`` while it still could be one."""
        if self._failed is not None:
            raise self._failed
        if self._parts:
            chunk = self._parts[0] + chunk  # at most two bytes of a BOM so far
            self._parts = []
            self._partial_bytes = 0
        if len(chunk) < 3 and _BOM.startswith(chunk):
            self._parts = [chunk]  # could still be a BOM: wait for more bytes
            self._partial_bytes = len(chunk)
            return b""
        self._started = True
        return chunk[3:] if chunk.startswith(_BOM) else chunk

    def _end_long(self, chunk: bytes) -> tuple[bytes | None, bytes]:
        """While a long partial line is held, look for its end in ``chunk`` only, never re-joining the line.

        Returns the completed line and ``chunk`` from that line's end on, or ``(None, b"")`` if ``chunk`` has
        no line end (it is then held too, within the cap).
        """
        end = chunk.find(b"\n")
        cr = chunk.find(b"\r", 0, end) if end >= 0 else chunk.find(b"\r")
        if cr >= 0:
            end = cr
        if end < 0:
            self._hold(chunk)
            return None, b""
        seen = self._partial_bytes + end
        if seen > self._max_line_bytes:
            self._fail(SSELineTooLong(self._max_line_bytes, seen))
        self._parts.append(chunk[:end])
        line = _join(self._parts)
        self._parts = []
        self._partial_bytes = 0
        return line, chunk[end:]

    def _hold(self, piece: bytes) -> None:
        """Keep ``piece`` as part of the long partial line, or fail if the line would pass the cap."""
        seen = self._partial_bytes + len(piece)
        if seen > self._max_line_bytes:
            self._fail(SSELineTooLong(self._max_line_bytes, seen))
        self._parts.append(piece)
        self._partial_bytes = seen

    def _cut_too_long(
        self, lines: list[bytes], tail: bytes
    ) -> tuple[list[bytes], bytes, SSELineTooLong | None]:
        """For a read longer than the line cap: the lines before the first too-long one, and its error.

        A too-long tail (a partial line) fails the same way, after the complete lines before it are applied.
        """
        cap = self._max_line_bytes
        for i, line in enumerate(lines):
            if len(line) > cap:
                return lines[:i], b"", SSELineTooLong(cap, len(line))
        if len(tail) > cap:
            return lines, b"", SSELineTooLong(cap, len(tail))
        return lines, tail, None

    def _add_data(self, value: bytes, events: list[SSEEvent]) -> None:
        """A second or later ``data`` line of one event: only now can the event outgrow the line cap."""
        if not self._data_bytes:
            self._data_bytes = len(self._data[0]) + 1
        self._data_bytes += len(value) + 1  # + the LF that will join them
        if self._data_bytes > self._max_event_bytes:
            self._fail(SSEEventTooLarge(self._max_event_bytes, self._data_bytes, events))
        self._data.append(value)

    def _joined_data(self) -> bytes:
        self._data_bytes = 0
        return b"\n".join(self._data)

    def _field(self, line: bytes, events: list[SSEEvent]) -> None:
        if line[:1] == b":":
            return  # comment / keep-alive
        name, sep, raw = line.partition(b":")
        if sep and raw[:1] == b" ":
            raw = raw[1:]
        if name == b"data":
            if self._data:
                self._add_data(raw, events)
            else:
                self._data.append(raw)
        elif name == b"event":
            self._event = raw.decode("utf-8", "replace")
        elif name == b"id" and b"\x00" not in raw:
            self._last_id = raw.decode("utf-8", "replace")

    def _fail(self, error: SSEDecoderError) -> None:
        """Drop everything held, remember ``error`` so later calls raise it too, and raise it."""
        self._parts = []
        self._partial_bytes = 0
        self._data = []
        self._data_bytes = 0
        self._failed = error
        self._started = False  # routes the next feed through _start, which re-raises
        raise error
