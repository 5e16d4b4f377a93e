"""SSE decoding stays linear in a line's length and bounded in memory, however the line arrives.

"Oversized line": one 50 MB line without a newline was re-joined on every read, so its cost grew
with the square of its length and a worker sat at a full core for minutes. These tests pin both halves of
the fix: a long line is joined once, and a line or event past its cap fails with a typed error while the
decoder holds no more than the cap.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import pytest

from tui.engine.stream import sse
from tui.engine.stream.sse import (
    DEFAULT_MAX_LINE_BYTES,
    SSEDecoder,
    SSEDecoderError,
    SSEEvent,
    SSEEventTooLarge,
    SSELineTooLong,
)

MIB = 1 << 20
READ = b"x" * (64 << 10)


def count_joins(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Replace the decoder's one join of partial-line pieces; return the byte counts it joined, per join."""
    joined: list[int] = []
    real: Callable[[Iterable[bytes]], bytes] = sse._join

    def counting(parts: Iterable[bytes]) -> bytes:
        line = real(parts)
        joined.append(len(line))
        return line

    monkeypatch.setattr(sse, "_join", counting)
    return joined


def feed_long_line(decoder: SSEDecoder, total_bytes: int) -> list[SSEEvent]:
    """One ``data:`` line of ``total_bytes`` x's in 64 KiB reads, then its end."""
    events = decoder.feed(b"data: ")
    for _ in range(total_bytes // len(READ)):
        events += decoder.feed(READ)
    return events + decoder.feed(b"\n\n")


def test_50_mb_line_is_joined_once(monkeypatch: pytest.MonkeyPatch) -> None:
    joined = count_joins(monkeypatch)
    decoder = SSEDecoder(max_line_bytes=64 * MIB, max_event_bytes=64 * MIB)
    (event,) = feed_long_line(decoder, 50 * MIB)
    assert len(event.data) == 50 * MIB
    assert joined == [50 * MIB + len(b"data: ")]  # one join, of exactly the line: nothing was re-joined
    assert decoder.buffered_bytes == 0


def test_long_line_cost_is_linear() -> None:
    """CPU time for the reads of a 50 MB line is about 10x that for 5 MB (re-joining made it about 100x).

    Only the reads before the line end are timed: that is where re-joining cost the square of the length
    (the final join and decode are linear either way). The bound is loose, for a noisy machine.
    """

    def cpu_s(total_bytes: int) -> float:
        best = float("inf")
        for _ in range(3):
            decoder = SSEDecoder(max_line_bytes=64 * MIB, max_event_bytes=64 * MIB)
            decoder.feed(b"data: ")
            t0 = time.process_time()
            for _ in range(total_bytes // len(READ)):
                decoder.feed(READ)
            best = min(best, time.process_time() - t0)
            assert decoder.buffered_bytes == total_bytes + len(b"data: ")
        return best

    small, big = cpu_s(5 * MIB), cpu_s(50 * MIB)
    assert big < 30 * max(small, 2e-4), (small, big)


def test_line_cap_raises_as_soon_as_passed_and_holds_no_more() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: ") == []
    held = len(b"data: ")
    with pytest.raises(SSELineTooLong) as caught:
        while True:
            decoder.feed(READ)
            held += len(READ)
            assert decoder.buffered_bytes == held <= DEFAULT_MAX_LINE_BYTES
    error = caught.value
    assert held <= DEFAULT_MAX_LINE_BYTES < held + len(READ)  # raised by the read that passed the cap
    assert error.limit_bytes == DEFAULT_MAX_LINE_BYTES
    assert error.seen_bytes == held + len(READ)
    assert decoder.buffered_bytes == 0  # the rest is dropped
    assert isinstance(error, SSEDecoderError)
    assert "1,048,576" in str(error)
    with pytest.raises(SSELineTooLong):
        decoder.feed(b"\n\ndata: more\n\n")  # a failed decoder stays failed
    with pytest.raises(SSELineTooLong):
        decoder.flush()


@pytest.mark.parametrize(
    "reads",
    [
        [b"data: a\n\n" + b"data: " + b"x" * 100],  # partial line in one big read
        [b"data: a\n\n" + b"data: " + b"x" * 100 + b"\n\n"],  # complete line in one big read
        [b"data: a\n\n", b"data: " + b"x" * 40, b"x" * 60 + b"\n"],  # short partial, then the rest
        [b"data: a\n\ndata: ", *[b"x" * 10] * 10, b"\n"],  # ended after the cap, in small reads
    ],
    ids=["partial in one read", "complete in one read", "two reads", "small reads"],
)
def test_line_cap_every_way_in(reads: list[bytes]) -> None:
    decoder = SSEDecoder(max_line_bytes=64, max_event_bytes=64)
    events: list[SSEEvent] = []
    with pytest.raises(SSELineTooLong) as caught:
        for read in reads:
            events += decoder.feed(read)
            assert decoder.buffered_bytes <= 64
    assert [e.data for e in events + caught.value.events] == ["a"]  # what came before the bad line survives
    assert caught.value.limit_bytes == 64 < caught.value.seen_bytes
    assert decoder.buffered_bytes == 0


def test_line_at_the_cap_is_fine() -> None:
    line = b"data: " + b"y" * 58
    for reads in ([line + b"\n\n"], [line[:30], line[30:], b"\n\n"], [line, b"\r", b"\n\r\n"]):
        decoder = SSEDecoder(max_line_bytes=len(line), max_event_bytes=len(line))
        assert [e.data for r in reads for e in decoder.feed(r)] == ["y" * 58]


def test_event_cap_bounds_data_lines_without_a_blank_line() -> None:
    decoder = SSEDecoder(max_line_bytes=1024, max_event_bytes=4096)
    with pytest.raises(SSEEventTooLarge) as caught:
        for _ in range(1000):
            decoder.feed(b"data: " + b"z" * 500 + b"\n")
            assert decoder.buffered_bytes <= 4096
    assert caught.value.limit_bytes == 4096 < caught.value.seen_bytes
    assert "SSE event data over 4,096 bytes" in str(caught.value)
    assert decoder.buffered_bytes == 0
    assert isinstance(caught.value, SSEDecoderError)


def test_event_cap_counts_the_joining_lfs() -> None:
    decoder = SSEDecoder(max_line_bytes=7, max_event_bytes=8)
    assert [e.data for e in decoder.feed(b"data:ab\ndata:cd\ndata:e\n\n")] == ["ab\ncd\ne"]  # 8 bytes
    with pytest.raises(SSEEventTooLarge) as caught:
        decoder.feed(b"data:ab\ndata\ndata:cd\ndata:e\n\n")  # 9: a bare ``data`` line counts too
    assert caught.value.seen_bytes == 9


@pytest.mark.parametrize(("line", "event"), [(0, 10), (10, 5)])
def test_caps_must_make_sense(line: int, event: int) -> None:
    with pytest.raises(ValueError, match="max_line_bytes"):
        SSEDecoder(max_line_bytes=line, max_event_bytes=event)
