"""SSE decoding from bytes: table tests with hand-split reads."""

from __future__ import annotations

import pytest

from tui.engine.stream import sse
from tui.engine.stream.sse import SSEDecoder, SSEEvent


def decode(*reads: bytes, flush: bool = True) -> list[SSEEvent]:
    d = SSEDecoder()
    out: list[SSEEvent] = []
    for r in reads:
        out += d.feed(r)
    if flush:
        out += d.flush()
    return out


def data(events: list[SSEEvent]) -> list[str]:
    return [e.data for e in events]


CASES: list[tuple[str, list[bytes], list[str]]] = [
    ("lf", [b"data: a\n\ndata: b\n\n"], ["a", "b"]),
    ("crlf", [b"data: a\r\n\r\ndata: b\r\n\r\n"], ["a", "b"]),
    ("cr only", [b"data: a\r\rdata: b\r\r"], ["a", "b"]),
    ("crlf split between reads", [b"data: a\r", b"\n\r", b"\n"], ["a"]),
    ("cr at end of read, next read a new line", [b"data: a\r", b"data: b\r", b"\r"], ["a\nb"]),
    ("lf alone after a cr-ended read", [b"data: a\r", b"\n", b"\n", b"data: b\n\n"], ["a", "b"]),
    ("mixed line ends", [b"data: a\rdata: b\ndata: c\r\n\r\ndata: d\n\r\n"], ["a\nb\nc", "d"]),
    ("no space after colon", [b"data:a\n\n"], ["a"]),
    ("only one space stripped", [b"data:  a\n\n"], [" a"]),
    ("multi-line data joined with LF", [b"data: a\ndata: b\r\ndata:\n\n"], ["a\nb\n"]),
    ("comment and keep-alive ignored", [b": ping\n\n:\n\ndata: x\n\n"], ["x"]),
    ("unknown field ignored", [b"foo: bar\ndata: x\nretry: 10\n\n"], ["x"]),
    ("blank line without data dispatches nothing", [b"\n\n\n"], []),
    ("field with no colon", [b"data\n\n"], [""]),
    ("BOM at start", [b"\xef\xbb\xbfdata: a\n\n"], ["a"]),
    ("BOM split", [b"\xef", b"\xbb", b"\xbfdata: a\n\n"], ["a"]),
    ("line split mid-field-name", [b"da", b"ta: x\n", b"\n"], ["x"]),
    ("utf-8 char split across reads", ["data: ż\n\n".encode()[:7], "data: ż\n\n".encode()[7:]], ["ż"]),
    (
        "u2028 inside json is not a line break",
        ['data: {"t": "a\u2028b\u0085c"}\n\n'.encode()],
        ['{"t": "a\u2028b\u0085c"}'],
    ),
    ("done", [b"data: [DONE]\n\n"], ["[DONE]"]),
    ("final event without blank line (flush)", [b"data: a\n\ndata: last"], ["a", "last"]),
    ("final data line with LF but no blank line", [b"data: last\n"], ["last"]),
    ("invalid utf-8 replaced, not raised", [b"data: \xff\n\n"], ["\ufffd"]),
]


@pytest.mark.parametrize(("name", "reads", "expected"), CASES, ids=[c[0] for c in CASES])
def test_table(name: str, reads: list[bytes], expected: list[str]) -> None:
    assert data(decode(*reads)) == expected


@pytest.fixture(params=["short", "long"])
def partial_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test on both ways a partial line is kept: prepended to the next read, and kept in pieces."""
    if request.param == "long":
        monkeypatch.setattr(sse, "_SMALL_PARTIAL_BYTES", 0)
    return str(request.param)


@pytest.mark.parametrize(("name", "reads", "expected"), CASES, ids=[c[0] for c in CASES])
def test_every_split_on_both_partial_paths(
    name: str, reads: list[bytes], expected: list[str], partial_path: str
) -> None:
    whole = b"".join(reads)
    assert data(decode(*reads)) == expected
    for cut in range(len(whole) + 1):
        assert data(decode(whole[:cut], whole[cut:])) == expected, cut
    assert data(decode(*[whole[i : i + 1] for i in range(len(whole))])) == expected


SAMPLE = (
    b": keep-alive\r\n"
    b"event: message\nid: 1\r"
    b'data: {"t": "\xc5\xbc\xe2\x80\xa8"}\r\n\r\n'
    b"data: a\rdata:b\n\n"
    b"retry: 5\ndata: [DONE]\r\r"
)
SAMPLE_EVENTS = [
    SSEEvent("message", '{"t": "\u017c\u2028"}', "1"),
    SSEEvent("message", "a\nb", "1"),
    SSEEvent("message", "[DONE]", "1"),
]


def test_sample_stream_every_two_cuts(partial_path: str) -> None:
    """Every way of cutting a stream with all the features into three reads gives the same events."""
    n = len(SAMPLE)
    for i in range(n + 1):
        for j in range(i, n + 1):
            assert decode(SAMPLE[:i], SAMPLE[i:j], SAMPLE[j:]) == SAMPLE_EVENTS, (i, j)


@pytest.mark.parametrize("end", [b"\n", b"\r", b"\r\n"], ids=["lf", "cr", "crlf"])
def test_long_line_end_anywhere(end: bytes) -> None:
    """A line past the short-partial threshold, its line end landing at, across and after a read boundary."""
    value = b"x" * (3 * sse._SMALL_PARTIAL_BYTES)
    stream = b"data: " + value + end + b"data: y" + end + end + b"data: z" + end + end
    expected = [value.decode() + "\ny", "z"]
    line_end = 6 + len(value)
    for cut in range(line_end - 2, line_end + len(end) + 3):
        for step in (1000, 4096, 10_000):
            reads = [stream[:cut]] + [stream[k : k + step] for k in range(cut, len(stream), step)]
            assert data(decode(*reads)) == expected, (cut, step)


def test_event_name_and_id() -> None:
    (ev,) = decode(b"event: error\nid: 7\ndata: {}\n\n")
    assert ev == SSEEvent("error", "{}", "7")
    (ev,) = decode(b"data: x\n\n")
    assert ev.event == "message"


def test_event_name_resets_after_dispatch() -> None:
    evs = decode(b"event: error\ndata: a\n\ndata: b\n\n")
    assert [e.event for e in evs] == ["error", "message"]


def test_events_returned_as_soon_as_complete() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\n") == []
    assert data(d.feed(b"\ndata: b")) == ["a"]
    assert data(d.feed(b"\n\n")) == ["b"]
    assert d.flush() == []


def test_empty_feed() -> None:
    assert SSEDecoder().feed(b"") == []
