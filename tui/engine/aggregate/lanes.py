"""Per-request lanes: the live token streams a face shows, the recently finished ones, and a request's detail.

Bounded: text capped per request (`TEXT_CAP`), an in-flight request's latest `LANE_CHUNKS` chunk stamps
(dropped at its end: its record carries them all), at most `FINISHED_LANES` finished lanes, and the most
recent finished records (at most `RECENT_CAP` of them and `RECENT_CHUNKS` chunk stamps in all, so long
outputs cannot blow it up) for `Lanes.detail`.
"""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate import metrics as m
from tui.engine.records import RequestRecord
from tui.engine.snapshot import LaneState, LaneView, RequestDetail
from tui.engine.wire import LaneDelta

RECENT_CAP = 2_000
"""Finished records kept for `Lanes.detail`."""
RECENT_CHUNKS = 500_000
"""Chunk stamps kept across the recent records (4 MB)."""
TEXT_CAP = 32_768
"""Characters of generated text kept per request (the tail)."""
TEXT_TAIL = 300
"""Characters of a lane's text a `LaneView` shows."""
LANE_CHUNKS = 4096
"""Chunk stamps an in-flight request's detail shows (the latest; `RequestDetail.chunks_dropped` counts the
earlier ones). A lane holds at most a quarter more between trims: 200 long outputs stay under 20 MB."""
LANE_LINGER_S = 1.5
"""A finished request's lane stays visible this long (so a face can flash ok/error)."""
FINISHED_LANES = 256
"""Finished lanes kept (their text, for the detail of a request whose record left the recent ring)."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class TextTail:
    """Streamed text kept to its last `TEXT_CAP` characters (trimmed now and then, not per piece)."""

    __slots__ = ("chars", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.chars = 0

    def append(self, text: str) -> None:
        """Add streamed text, trimming to the last `TEXT_CAP` characters now and then."""
        if not text:
            return
        self.parts.append(text)
        self.chars += len(text)
        if self.chars > 2 * TEXT_CAP:
            joined = "".join(self.parts)[-TEXT_CAP:]
            self.parts = [joined]
            self.chars = len(joined)

    def text(self) -> str:
        """The kept text (its last `TEXT_CAP` characters)."""
        return "".join(self.parts)[-TEXT_CAP:]

    def tail(self, n: int = TEXT_TAIL) -> str:
        """The last ``n`` characters."""
        if n <= 0:
            return ""
        out: list[str] = []
        got = 0
        for part in reversed(self.parts):
            out.append(part)
            got += len(part)
            if got >= n:
                break
        return "".join(reversed(out))[-n:]


@dataclass
class Lane:
    """The face's view of one request's token stream (text capped to its tail)."""

    request_id: int
    level_id: int
    sent_ns: int
    answer: TextTail = field(default_factory=TextTail)
    """The answer text (``content``)."""
    reasoning: TextTail = field(default_factory=TextTail)
    """The reasoning text (``reasoning_content``/``reasoning``), kept apart so a face draws it apart."""
    tokens: int = 0
    first_content_ns: int | None = None
    state: LaneState = "waiting"
    end_ns: int | None = None
    error: str | None = None
    chunk_ns: array[int] = field(default_factory=lambda: array("q"))
    """Arrival of the latest content chunks (see `LANE_CHUNKS`); emptied when the request finishes."""
    chunk_tokens: array[int] | None = field(default_factory=lambda: array("q"))
    """Tokens in each of those chunks while the server counts them per chunk; else None."""
    chunks_dropped: int = 0
    """Chunks trimmed off the front of `chunk_ns`."""

    def add_chunks(self, stamps: bytes, counts: bytes | None) -> None:
        """Append a worker delta's new chunk stamps (and per-chunk token counts, None once unknown), trimming
        to the latest `LANE_CHUNKS` once a quarter more has piled up (so the memmove is rare)."""
        if counts is None:
            self.chunk_tokens = None
        if not stamps:
            return
        self.chunk_ns.frombytes(stamps)
        if self.chunk_tokens is not None and counts:
            self.chunk_tokens.frombytes(counts)
        excess = len(self.chunk_ns) - LANE_CHUNKS
        if excess > LANE_CHUNKS // 4:
            del self.chunk_ns[:excess]
            if self.chunk_tokens is not None:
                del self.chunk_tokens[:excess]
            self.chunks_dropped += excess

    def drop_chunks(self) -> None:
        """Forget the stamps (the finished record has them all)."""
        self.chunk_ns = array("q")
        self.chunk_tokens = None
        self.chunks_dropped = 0

    @property
    def chars(self) -> int:
        """Answer characters kept."""
        return self.answer.chars

    def append(self, text: str, reasoning: str = "") -> None:
        """Add streamed answer and reasoning text."""
        self.answer.append(text)
        self.reasoning.append(reasoning)

    def text(self) -> str:
        """The kept text, reasoning before the answer (a reasoning model thinks first)."""
        reasoning = self.reasoning.text()
        return f"{reasoning}\n\n{self.answer.text()}" if reasoning else self.answer.text()

    def tails(self, n: int = TEXT_TAIL) -> tuple[str, str]:
        """The last ``n`` characters as (reasoning, answer): the answer's tail, and before it as much of the
        reasoning's as fits (all of it while no answer has come)."""
        answer = self.answer.tail(n)
        return self.reasoning.tail(n - len(answer)), answer


class Lanes:
    """The in-flight lanes, the recently finished ones, and the recent finished records."""

    def __init__(self, max_lanes: int = 64) -> None:
        self.max_lanes = max_lanes
        """Lanes a `views` call returns at most (in flight first)."""
        self.live: dict[int, Lane] = {}
        """In-flight requests by id."""
        self.finished: OrderedDict[int, Lane] = OrderedDict()
        self.recent: OrderedDict[int, RequestRecord] = OrderedDict()
        self.recent_chunks = 0

    def apply(self, delta: LaneDelta) -> None:
        """Fold one worker lane delta in (a delta of an already finished request is late: ignored)."""
        rid, level_id, sent_ns, text, tokens, first_ns, stamps, counts, reasoning = delta
        lane = self.live.get(rid)
        if lane is None:
            if rid in self.finished:
                return
            lane = self.live[rid] = Lane(rid, level_id, sent_ns)
        lane.sent_ns = sent_ns  # a retry restamps the send: offsets count from the latest
        lane.append(text, reasoning)
        lane.tokens = tokens
        if first_ns is not None:
            lane.first_content_ns = first_ns
            lane.state = "streaming"
        if stamps or counts is None:
            lane.add_chunks(stamps, counts)

    def finish(self, rec: RequestRecord) -> None:
        """The request ended: its lane moves to the finished ones, its record into the recent ring."""
        lane = self.live.pop(rec.request_id, None) or Lane(rec.request_id, rec.level_id, rec.sent_ns)
        lane.state = rec.status
        lane.end_ns = rec.end_ns
        lane.error = rec.error
        lane.tokens = rec.output_tokens or lane.tokens
        lane.first_content_ns = rec.first_content_ns
        lane.drop_chunks()
        self.finished[rec.request_id] = lane
        if len(self.finished) > FINISHED_LANES:
            self.finished.popitem(last=False)
        self.recent[rec.request_id] = rec
        self.recent_chunks += len(rec.chunk_ns)
        while len(self.recent) > 1 and (len(self.recent) > RECENT_CAP or self.recent_chunks > RECENT_CHUNKS):
            _, old = self.recent.popitem(last=False)
            self.recent_chunks -= len(old.chunk_ns)

    def sent_by_level(self) -> dict[int, list[int]]:
        """Send stamps of the in-flight requests, per level (a level's steady window depends on them)."""
        out: dict[int, list[int]] = {}
        for lane in self.live.values():
            out.setdefault(lane.level_id, []).append(lane.sent_ns)
        return out

    def views(self, now_ns: int) -> tuple[tuple[LaneView, ...], int]:
        """Lanes to show (in flight first, then recently finished) and how many in-flight ones did not fit."""
        live = sorted(self.live.values(), key=lambda lane: lane.request_id)
        shown = live[: self.max_lanes]
        hidden = len(live) - len(shown)
        room = self.max_lanes - len(shown)
        if room > 0:
            linger = now_ns - int(LANE_LINGER_S * 1e9)
            done = [ln for ln in reversed(self.finished.values()) if (ln.end_ns or 0) >= linger][:room]
            shown = sorted(shown + done, key=lambda lane: lane.request_id)
        return tuple(_lane_view(ln, now_ns) for ln in shown), hidden

    def detail(self, request_id: int, t0_ns: int) -> RequestDetail | None:
        """A finished request from the recent ring, or one from its lane: in flight, its chunk timeline so
        far (the latest `LANE_CHUNKS` chunks); finished but no longer in the ring, text and TTFT only."""
        rec = self.recent.get(request_id)
        lane = self.live.get(request_id) or self.finished.get(request_id)
        if rec is not None:
            return record_detail(rec, t0_ns, text=lane.text() if lane is not None else "")
        return None if lane is None else lane_detail(lane, t0_ns)


def _lane_view(lane: Lane, now_ns: int) -> LaneView:
    reasoning, answer = lane.tails()
    end = lane.end_ns if lane.end_ns is not None else now_ns
    ttft = None if lane.first_content_ns is None else (lane.first_content_ns - lane.sent_ns) / 1e6
    tps = None
    if lane.first_content_ns is not None and end > lane.first_content_ns and lane.tokens > 1:
        tps = (lane.tokens - 1) / ((end - lane.first_content_ns) / 1e9)
    return LaneView(
        request_id=lane.request_id,
        level_id=lane.level_id,
        state=lane.state,
        text_tail=answer,
        reasoning_tail=reasoning,
        output_tokens=lane.tokens,
        age_s=max(0.0, (end - lane.sent_ns) / 1e9),
        ttft_ms=ttft,
        tokens_per_s=tps,
        error=lane.error,
    )


# --- the request detail -----------------------------------------------------------------------------


def request_detail(
    *,
    request_id: int,
    level_id: int,
    state: LaneState,
    t0_ns: int,
    sent_ns: int,
    first_content_ns: int | None,
    end_ns: int | None,
    tpot_end_ns: int | None,
    chunk_ns: IntArray,
    chunks_dropped: int,
    output_tokens: int | None,
    token_source: str,
    chunk_tokens: Sequence[int] | None,
    input_tokens: int | None = None,
    http_status: int | None = None,
    error_class: str | None = None,
    error: str | None = None,
    text: str = "",
) -> RequestDetail:
    """The one detail builder, for a finished record and an in-flight lane alike, so both show the same
    figures from the same stamps.

    ``end_ns``: None while in flight (no E2E yet); ``tpot_end_ns``: what TPOT is measured to (the end; in
    flight the latest chunk stands in for it; None: no TPOT). ``chunk_ns``: the kept chunk stamps, after
    ``chunks_dropped`` earlier ones. Per-chunk tokens: the server's counts when they cover every kept chunk,
    else a usage total spread evenly, else one per chunk."""
    spread = output_tokens if token_source == "usage" else None
    weights = m.chunk_token_weights(chunk_ns.size, spread, chunk_tokens)
    tpot: float | None = None
    if tpot_end_ns is not None:
        fig = m.request_figures(
            [sent_ns],
            [first_content_ns if first_content_ns is not None else np.nan],
            [tpot_end_ns],
            [output_tokens or 0],
            [chunk_ns.size + chunks_dropped],
        )
        value = float(fig.tpot_ms[0])
        tpot = None if math.isnan(value) else value
    return RequestDetail(
        request_id=request_id,
        level_id=level_id,
        state=state,
        sent_s=(sent_ns - t0_ns) / 1e9,
        ttft_ms=None if first_content_ns is None else (first_content_ns - sent_ns) / 1e6,
        e2e_ms=None if end_ns is None else (end_ns - sent_ns) / 1e6,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        token_source=token_source,
        chunk_offsets_ms=tuple(((chunk_ns - sent_ns) / 1e6).tolist()),
        chunk_tokens=_integer_split(weights),
        itl_chunk=m.stats(m.chunk_gaps_ms(chunk_ns)),
        tpot_ms=tpot,
        http_status=http_status,
        error_class=error_class,
        error=error,
        text=text,
        chunks_dropped=chunks_dropped,
    )


def record_detail(rec: RequestRecord, t0_ns: int, *, text: str = "") -> RequestDetail:
    """A finished request's detail, from its record (every chunk stamp)."""
    chunks = np.frombuffer(rec.chunk_ns, dtype=np.int64) if len(rec.chunk_ns) else np.empty(0, np.int64)
    return request_detail(
        request_id=rec.request_id,
        level_id=rec.level_id,
        state=rec.status,
        t0_ns=t0_ns,
        sent_ns=rec.sent_ns,
        first_content_ns=rec.first_content_ns,
        end_ns=rec.end_ns,
        tpot_end_ns=rec.end_ns,
        chunk_ns=chunks,
        chunks_dropped=0,
        output_tokens=rec.output_tokens,
        token_source=rec.output_source,
        chunk_tokens=rec.chunk_tokens,
        input_tokens=rec.input_tokens,
        http_status=rec.http_status,
        error_class=rec.error_class,
        error=rec.error,
        text=text,
    )


def lane_detail(lane: Lane, t0_ns: int) -> RequestDetail:
    """A request's detail from its lane: in flight, the figures so far over its latest chunks."""
    kept = lane.chunk_ns[-LANE_CHUNKS:]  # a copy: numpy must not hold the lane's growing buffer
    chunks = np.frombuffer(kept, dtype=np.int64) if len(kept) else np.empty(0, np.int64)
    counts = lane.chunk_tokens
    counted = counts is not None and 0 < len(counts) == len(lane.chunk_ns)
    return request_detail(
        request_id=lane.request_id,
        level_id=lane.level_id,
        state=lane.state,
        t0_ns=t0_ns,
        sent_ns=lane.sent_ns,
        first_content_ns=lane.first_content_ns,
        end_ns=lane.end_ns,
        tpot_end_ns=int(chunks[-1]) if chunks.size else None,
        chunk_ns=chunks,
        chunks_dropped=lane.chunks_dropped + len(lane.chunk_ns) - len(kept),
        output_tokens=lane.tokens,
        # the worker counts one per chunk when the server does not say
        token_source="usage" if counted else "chunks",
        chunk_tokens=counts[-LANE_CHUNKS:] if counted and counts is not None else None,
        error=lane.error,
        text=lane.text(),
    )


def _integer_split(weights: FloatArray) -> tuple[int, ...]:
    """Whole tokens per chunk summing to the (rounded) total, when only an even spread is known."""
    cum = np.round(np.cumsum(weights))
    return tuple(int(x) for x in np.diff(cum, prepend=0.0).tolist())
