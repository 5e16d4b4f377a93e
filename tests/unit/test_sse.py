"""SSE decoding from bytes: table tests with hand-split reads."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize(("name", "reads", "expected"), CASES, ids=[c[0] for c in CASES])
def test_any_split_gives_the_same_events(name: str, reads: list[bytes], expected: list[str]) -> None:
    whole = b"".join(reads)
    for cut in range(len(whole) + 1):
        assert data(decode(whole[:cut], whole[cut:])) == expected, cut
    assert data(decode(*[whole[i : i + 1] for i in range(len(whole))])) == expected


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
