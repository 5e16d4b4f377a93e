"""Server-sent events decoded from bytes.

Lines are split on CR, LF and CRLF only, *before* any text decoding, and each complete line is then decoded
as UTF-8. Splitting text instead (``str.splitlines``) would also break on U+2028, U+0085 and friends, which
are legal unescaped inside JSON strings; decoding each read instead would break a multi-byte character
that straddles two reads. Both happen in the wild, so the decoder keeps partial lines as bytes across
reads (and a trailing CR, in case the LF of a CRLF arrives in the next read).

Field handling follows the WHATWG event-stream rules that matter for LLM servers: ``data`` lines are
joined with ``\\n``, ``event`` names the event, comments (``:`` lines, used as keep-alives) and unknown
fields are ignored, and a blank line dispatches. ``id`` is kept; ``retry`` is ignored (we never reconnect).
"""

from __future__ import annotations

from typing import NamedTuple

_BOM = b"\xef\xbb\xbf"


class SSEEvent(NamedTuple):
    """One dispatched event: its name (``message`` unless the server said otherwise) and joined data."""

    event: str
    data: str
    id: str | None = None


class SSEDecoder:
    """Incremental decoder: feed it whatever bytes arrive, get back the events they complete.

    >>> d = SSEDecoder()
    >>> d.feed(b'data: {"a"')
    []
    >>> d.feed(b': 1}\\r\\n\\r\\n')
    [SSEEvent(event='message', data='{"a": 1}', id=None)]
    """

    __slots__ = ("_buf", "_data", "_event", "_last_id", "_skip_lf", "_started")

    def __init__(self) -> None:
        self._buf = b""
        """An incomplete last line (never contains CR or LF)."""
        self._skip_lf = False
        """The previous read ended with CR: a leading LF in the next read completes that CRLF."""
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None
        self._started = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Add bytes from the stream; return the events completed by them, in order."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 10:  # the LF of a CRLF split across reads
                chunk = chunk[1:]
                if not chunk:
                    return []
        buf = self._buf + chunk if self._buf else chunk
        if not self._started:
            if len(buf) < 3 and _BOM.startswith(buf):
                self._buf = buf  # could still be a BOM: wait for more bytes
                return []
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[3:]
                if not buf:
                    self._buf = b""
                    return []
        # bytes.splitlines breaks on \r, \n and \r\n only (unlike str.splitlines).
        lines = buf.splitlines()
        last = buf[-1]
        if last == 10 or last == 13:
            self._buf = b""
            self._skip_lf = last == 13
        else:
            self._buf = lines.pop()
        events: list[SSEEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(self._dispatch())
                else:
                    self._event = ""
                continue
            if line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
                self._data.append(value.decode("utf-8", "replace"))
                continue
            self._field(line)
        return events

    def flush(self) -> list[SSEEvent]:
        """At end of stream: return an event left without its closing blank line, if any.

        The standard says to drop it; some servers end the stream right after the last ``data:`` line, and
        losing their final chunk (often the usage) would be worse than accepting it.
        """
        if self._buf:
            line, self._buf = self._buf, b""
            if line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
                self._data.append(value.decode("utf-8", "replace"))
            else:
                self._field(line)
        return [self._dispatch()] if self._data else []

    def _field(self, line: bytes) -> None:
        if line[:1] == b":":
            return  # comment / keep-alive
        name, sep, raw = line.partition(b":")
        if sep and raw[:1] == b" ":
            raw = raw[1:]
        if name == b"data":
            self._data.append(raw.decode("utf-8", "replace"))
        elif name == b"event":
            self._event = raw.decode("utf-8", "replace")
        elif name == b"id" and b"\x00" not in raw:
            self._last_id = raw.decode("utf-8", "replace")

    def _dispatch(self) -> SSEEvent:
        data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        event = SSEEvent(self._event or "message", data, self._last_id)
        self._data = []
        self._event = ""
        return event
