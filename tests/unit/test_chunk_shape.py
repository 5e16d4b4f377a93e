"""A stream's learned chunk shape (`tui.engine.stream.chunk_shape`) folds every read as the full path (SSE
decoder, whole-chunk parse, `apply_chunk`) does, and takes over only where that is proven: hand-made reads fed
to the protocol path's exchange on a connection without a socket, against the full path's fold."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import orjson
import pytest

import tui.engine.stream.protocol_request as protocol_request
from tests.support.stream_stand_ins import NullWire, StreamSession
from tui.engine.records import RequestRecord
from tui.engine.stream.apis import apply_messages_event, apply_responses_event
from tui.engine.stream.chunk_shape import learn_shape, text_holder
from tui.engine.stream.failures import EventApplier, Failure, handle_event
from tui.engine.stream.h1 import Connection, ConnectionPool
from tui.engine.stream.openai import StreamAccumulator, apply_chunk
from tui.engine.stream.protocol_request import _Exchange
from tui.engine.stream.sse import DEFAULT_MAX_LINE_BYTES, SSEDecoder, SSEDecoderError

CAP = DEFAULT_MAX_LINE_BYTES
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
BEFORE = b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
DONE = b"data: [DONE]\n\n"


def content(token: bytes, after: bytes = b',"finish_reason":null}]}') -> bytes:
    """A read holding one chat chunk whose delta's content is the raw JSON ``token``."""
    return BEFORE + b'"delta":{"content":' + token + b"}" + after + b"\n\n"


def text(value: str) -> bytes:
    return content(orjson.dumps(value))


ROLE = BEFORE + b'"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
FINISH = BEFORE + b'"delta":{},"finish_reason":"stop"}]}\n\n'
USAGE = b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}\n\n'


def _state(acc: StreamAccumulator) -> dict[str, Any]:
    """Everything an accumulator holds but its stamps' values."""
    return {
        "texts": list(acc.pending_text),
        "reply": list(acc.reply or []),
        "reasoning": list(acc.pending_reasoning),
        "chunks": len(acc.chunk_ns),
        "chunk_tokens": list(acc.chunk_tokens),
        "tokens": acc.tokens,
        "tokens_known": acc.tokens_known,
        "reasoning_chunks": acc.reasoning_chunks,
        "skipped": acc.skipped_lines,
        "finish": acc.finish_reason,
        "usage": (acc.usage_prompt, acc.usage_completion, acc.usage_cached, acc.usage_reasoning),
        "error": acc.error,
        "done": acc.done,
        "answered": acc.first_answer_ns is not None,
    }


def _full_path(reads: list[bytes], apply: EventApplier = apply_chunk) -> tuple[dict[str, Any], str | None]:
    """The fold without any shape: the decoder over each read, every event parsed whole."""
    acc = StreamAccumulator()
    acc.reply = []
    decoder = SSEDecoder()
    try:
        for read in [*reads, b"\n\n"]:
            for event in decoder.feed(read):
                if handle_event(event.event, event.data, acc, 1, orjson.loads, apply):
                    return _state(acc), None
    except Failure as exc:
        return _state(acc), exc.error_class
    except SSEDecoderError:
        return _state(acc), "oversized"
    return _state(acc), "disconnect"


async def _exchange(
    reads: list[bytes], monkeypatch: pytest.MonkeyPatch, apply: EventApplier = apply_chunk
) -> tuple[dict[str, Any], str | None, int]:
    """The protocol path's fold, each read its own HTTP chunk and socket read; and how many events took
    the full path's per-event rule."""
    full_events = 0

    def counted(*args: Any) -> bool:
        nonlocal full_events
        full_events += 1
        return handle_event(*args)

    monkeypatch.setattr(protocol_request, "handle_event", counted)
    pool = ConnectionPool(
        "http://127.0.0.1:9/v1",
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT),
        connect_timeout_s=1,
        read_timeout_s=5,
    )
    conn = Connection(pool)
    conn.connection_made(NullWire())  # type: ignore[arg-type]
    acc = StreamAccumulator()
    acc.reply = []
    record = RequestRecord(request_id=1, worker=0, seq=0, level_id=1, sent_ns=0)
    exchange = _Exchange(StreamSession(apply), record, acc, False, conn)
    conn.send(exchange, b"")
    conn.data_received(HEAD)
    for read in reads:
        conn.data_received(b"%x\r\n%b\r\n" % (len(read), read))
    conn.data_received(b"0\r\n\r\n")
    conn.abort()
    assert exchange.outcome.done()
    exc = exchange.outcome.exception()
    kind = None if exc is None else exc.error_class if isinstance(exc, Failure) else repr(exc)
    return _state(acc), kind, full_events


TRICKY_TEXTS = [" two", "", "é", "\u2028", 'say "hi"', "\\", 'a","x":"y', "\n", "\x01probe", "🙂", " " * 3]
TRICKY_READS = [
    content(b'"\xff"'),  # not UTF-8: the full path decodes it with replacement
    content(b'"a"},{"index":1,"delta":{"content":"b"'),  # two choices: not one string token
    content(b'"a\nb"'),  # a raw newline: two lines
    content(b' "spaced" '),  # other bytes around the string: not the shape's
    content(b'"x"', after=b',"finish_reason":"stop"}]}'),
    content(b'"y"'),
    b": ping\n\n",
    text(" after a comment"),
]


async def test_reads_of_the_shape_fold_as_the_full_path_does(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = [ROLE, text("one"), *map(text, TRICKY_TEXTS), *TRICKY_READS, FINISH, USAGE, DONE]
    got, kind, full_events = await _exchange(reads, monkeypatch)
    want, want_kind = _full_path(reads)
    assert (got, kind) == (want, want_kind)
    assert want_kind is None and want["chunks"] > len(TRICKY_TEXTS)
    # the role chunk, the one that shows the shape, the tricky reads that are not the shape (the comment
    # dispatches nothing), the finish, usage and [DONE]; the rest took the shape
    assert full_events == 2 + 5 + 3


async def test_a_read_split_inside_an_event_takes_the_full_path(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = text(" three")
    reads = [ROLE, text("one"), whole[:40], whole[40:], text(" four"), b": ka\r", text(" five"), DONE]
    got, kind, full_events = await _exchange(reads, monkeypatch)
    assert (got, kind) == _full_path(reads)
    assert got["texts"] == ["one", " three", " four", " five"]
    # the role, "one", " three" once whole, " five" (after a CR that may begin a CRLF) and [DONE]; " four"
    # follows a whole event and takes the shape
    assert full_events == 5


@pytest.mark.parametrize(
    ("reads", "why"),
    [
        ([ROLE, text("one"), b"event: error\n", text("boom"), DONE], "an event name held: the full path"),
        ([ROLE, text("one"), text("x" * (CAP + 1)), DONE], "past the line cap: oversized"),
        ([ROLE, text("one"), b'data: {"error":{"message":"gone"}}\n\n', text("z"), DONE], "stream error"),
    ],
)
async def test_failures_are_the_full_paths(
    reads: list[bytes], why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    got, kind, _ = await _exchange(reads, monkeypatch)
    want, want_kind = _full_path(reads)
    assert kind is not None, why
    assert (got, kind) == (want, want_kind), why


@pytest.mark.parametrize(
    ("read", "text_", "why"),
    [
        (content(b'"t"', after=b',"finish_reason":"stop"}]}'), "t", "a finish"),
        (BEFORE + b'"delta":{"content":"t","reasoning":"r"},"finish_reason":null}]}\n\n', "t", "reasoning"),
        (text("t")[:-2] + b"\r\n\r\n", "t", "CRLF"),
        (b'data: {"usage":{"completion_tokens":1},' + text("t")[6:], "t", "usage in the chunk"),
        (BEFORE + b'"delta":{"content":"t"},"logprobs":{"content":"t"}}]}\n\n', "t", "the text twice"),
        # the text's token is found once, but not where the delta's text is (written with an escape there)
        (BEFORE + b'"delta":{"content":"\\u0074"},"x":"t","finish_reason":null}]}\n\n', "t", "elsewhere"),
        (
            BEFORE + b'"delta":{"content":"t"},"delta":{"content":"\\u0074"},"finish_reason":null}]}\n\n',
            "t",
            "an earlier duplicate key, overridden",
        ),
    ],
)
def test_no_shape_is_learned_unless_proven(read: bytes, text_: str, why: str) -> None:
    assert learn_shape(read, text_, CAP) is None, why


def test_the_shape_of_a_plain_chunk_is_around_its_string_token() -> None:
    shape = learn_shape(text(" tok"), " tok", CAP)
    assert shape is not None
    assert shape.prefix == BEFORE + b'"delta":{"content":"'
    assert shape.suffix == b'"},"finish_reason":null}]}\n\n'
    read = text("other")
    assert orjson.loads(read[shape.cut : len(read) - shape.back]) == "other"


def _completion(token: bytes, finish: bytes = b"null") -> bytes:
    return (
        b'data: {"id":"c2","object":"text_completion","choices":[{"index":0,"text":'
        + token
        + b',"finish_reason":'
        + finish
        + b"}]}\n\n"
    )


async def test_completions_chunks_take_their_shape_too(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = [_completion(orjson.dumps(t)) for t in ["one", " two", "", ' "three"', "\u2028"]]
    reads += [_completion(b'"four"', b'"length"'), DONE]
    got, kind, full_events = await _exchange(reads, monkeypatch)
    assert (got, kind) == _full_path(reads)
    assert got["texts"] == ["one", " two", ' "three"', "\u2028", "four"]
    assert full_events == 3  # "one" shows the shape; the finish and [DONE] do not take it


# --- Responses and Messages: named events, the same fast path ------------------------------------------


def _event(name: str, obj: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (name.encode(), orjson.dumps(obj))


def _responses(texts: list[str], first: int = 0) -> list[bytes]:
    """A Responses stream as vLLM 0.32 writes it: every event counted by ``sequence_number`` (its field order
    openai's, the text before the count), usage in ``response.completed``."""
    seq = iter(range(first, first + len(texts) + 8))
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "usage": None}
    created = {"response": response, "sequence_number": next(seq), "type": "response.created"}
    added = {"item": {"id": "msg_1", "content": []}, "output_index": 0, "sequence_number": next(seq),
             "type": "response.output_item.added"}  # fmt: skip
    reads = [_event("response.created", created), _event("response.output_item.added", added)]
    for t in texts:
        delta = {"content_index": 0, "delta": t, "item_id": "msg_1", "logprobs": [], "output_index": 0,
                 "sequence_number": next(seq), "type": "response.output_text.delta"}  # fmt: skip
        reads.append(_event("response.output_text.delta", delta))
    usage = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": len(texts),
             "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    done = {**response, "status": "completed", "usage": usage}
    reads.append(_event("response.output_text.done", {"sequence_number": next(seq), "text": "".join(texts),
                                                      "type": "response.output_text.done"}))  # fmt: skip
    reads.append(_event("response.completed", {"response": done, "sequence_number": next(seq),
                                               "type": "response.completed"}))  # fmt: skip
    return reads


def _messages(texts: list[str], thinking: str = "") -> list[bytes]:
    """A Messages stream as vLLM 0.32 writes it: input usage in ``message_start``, output usage in
    ``message_delta``."""
    start = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
             "content": [], "model": "m", "usage": {"input_tokens": 12, "output_tokens": 0}}}  # fmt: skip
    reads = [_event("message_start", start)]
    if thinking:
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": thinking},
        }
        reads.append(_event("content_block_delta", delta))
    reads.append(_event("content_block_start", {"type": "content_block_start", "index": 1,
                                                "content_block": {"type": "text", "text": ""}}))  # fmt: skip
    for t in texts:
        delta = {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": t}}
        reads.append(_event("content_block_delta", delta))
    reads.append(_event("content_block_stop", {"type": "content_block_stop", "index": 1}))
    usage = {"input_tokens": 12, "output_tokens": len(texts)}
    end = {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": usage}
    reads.append(_event("message_delta", end))
    reads.append(_event("message_stop", {"type": "message_stop"}))
    return reads


async def test_responses_deltas_take_the_shape_across_their_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """From 7 the count grows to two digits and three: the same shape, its digits apart."""
    texts = ["one", *TRICKY_TEXTS, *(f" t{i}" for i in range(90))]
    reads = _responses(texts, first=7)
    got, kind, full_events = await _exchange(reads, monkeypatch, apply_responses_event)
    assert (got, kind) == _full_path(reads, apply_responses_event)
    assert kind is None and got["usage"][:3] == (12, len(texts), 4) and got["finish"] == "completed"
    assert got["texts"] == [t for t in texts if t]
    # created, item added, "one" (shows the shape), the text done and the completion; every other delta fast
    assert full_events == 5


async def test_a_responses_delta_whose_count_is_no_json_integer_takes_the_full_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads = _responses(["one", "two", "three", "four"])
    reads[4] = reads[4].replace(b'"sequence_number":4', b'"sequence_number":04')  # skipped, as in full
    reads[5] = reads[5].replace(b'"sequence_number":5', b'"sequence_number":-5')
    got, kind, full_events = await _exchange(reads, monkeypatch, apply_responses_event)
    assert (got, kind) == _full_path(reads, apply_responses_event)
    assert got["skipped"] == 1 and got["texts"] == ["one", "two", "four"]
    assert full_events == 7  # created, added, "one", the two miscounted, the text done, the completion


async def test_messages_text_deltas_take_the_shape_and_thinking_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = ["one", *TRICKY_TEXTS, " two"]
    reads = _messages(texts, thinking="hmm")
    later = {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "thinking_delta", "thinking": "later"},
    }
    reads.insert(5, _event("content_block_delta", later))
    got, kind, full_events = await _exchange(reads, monkeypatch, apply_messages_event)
    assert (got, kind) == _full_path(reads, apply_messages_event)
    assert kind is None and got["reasoning"] == ["hmm", "later"] and got["usage"][:2] == (12, len(texts))
    assert got["finish"] == "max_tokens"
    # start, thinking, block start, "one", the later thinking, block stop, message delta, stop
    assert full_events == 8


def test_a_count_before_the_text_or_of_another_object_is_no_shape() -> None:
    after = _responses(["t"])[2]
    assert learn_shape(after, "t", CAP, text_holder(apply_responses_event)) is not None
    nested = after.replace(b'"logprobs":[]', b'"logprobs":[{"sequence_number":3}]')
    assert learn_shape(nested, "t", CAP, text_holder(apply_responses_event)) is None
    reasoning = after.replace(b"output_text", b"reasoning_text")
    assert learn_shape(reasoning, "t", CAP, text_holder(apply_responses_event)) is None
    assert learn_shape(after, "t", CAP) is None  # read as chat it holds no text


STREAMS = Path(__file__).parent / "fixtures" / "streams"


@pytest.mark.parametrize(
    ("name", "apply", "full"),
    [
        # created, in progress, item and part added, the first delta (shows the shape), the text and the
        # part and item done, the completion with usage
        ("vllm_responses.sse", apply_responses_event, 9),
        # start with input usage, block start, the first delta, block stop, message delta with output
        # usage, stop
        ("vllm_messages.sse", apply_messages_event, 6),
    ],
)
async def test_vllms_recorded_streams_fold_the_same_on_the_shape(
    name: str, apply: EventApplier, full: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM 0.32's own bytes (`curl -N` of a 12-token answer), one event a read as it writes them, and the
    same bytes in reads of any length (the full path then): one fold."""
    body = (STREAMS / name).read_bytes()
    events = [e + b"\n\n" for e in body.split(b"\n\n") if e]
    got, kind, full_events = await _exchange(events, monkeypatch, apply)
    assert (got, kind) == _full_path(events, apply)
    assert kind is None and got["done"] and got["usage"][1] == 12 and got["chunks"] == 12
    assert full_events == full
    cut = [body[i : i + 100] for i in range(0, len(body), 100)]
    assert (await _exchange(cut, monkeypatch, apply))[:2] == (got, kind)
