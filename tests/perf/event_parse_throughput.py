"""How many streamed text chunks per second the protocol path folds into a request's accumulator, per API,
with each stream's chunk shape (`tui.engine.stream.chunk_shape`) and without it (every event SSE-split,
parsed whole and applied): the reads of one answer as vLLM 0.32 writes them (one event per read, in HTTP
chunks), through httptools' framing and the exchange's `body`, no socket.

    PYTHONPATH=. python tests/perf/event_parse_throughput.py [--tokens 256] [--streams 400] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import time
from typing import Any

import orjson

import tui.engine.stream.protocol_request as protocol_request
from tests.support.stream_stand_ins import NullWire, StreamSession
from tui.engine.records import RequestRecord
from tui.engine.stream.apis import apply_messages_event, apply_responses_event
from tui.engine.stream.failures import EventApplier
from tui.engine.stream.h1 import Connection, ConnectionPool
from tui.engine.stream.openai import StreamAccumulator, apply_chunk

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _event(name: str | None, obj: dict[str, Any]) -> bytes:
    head = b"event: %s\n" % name.encode() if name else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def chat(texts: list[str]) -> list[bytes]:
    base = {"id": "chatcmpl-5b1a6c0f0c8a4b6d9c2e7f1a3d4b5c6e", "object": "chat.completion.chunk",
            "created": 1735689600, "model": "gemma-3-270m"}  # fmt: skip
    reads = [_event(None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                 "logprobs": None, "finish_reason": None}]})]  # fmt: skip
    for t in texts:
        choice = {"index": 0, "delta": {"content": t}, "logprobs": None, "finish_reason": None}
        reads.append(_event(None, {**base, "choices": [choice]}))
    usage = {"prompt_tokens": 12, "completion_tokens": len(texts), "total_tokens": 12 + len(texts)}
    reads.append(_event(None, {**base, "choices": [], "usage": usage}))
    return [*reads, b"data: [DONE]\n\n"]


def responses(texts: list[str]) -> list[bytes]:
    item = "msg_a3c1f3b3c0a94bd2b0e64e5b7b4f3c2d"
    reads = [_event("response.created", {"response": {"id": "resp_1", "status": "in_progress"},
                                         "sequence_number": 0, "type": "response.created"})]  # fmt: skip
    for i, t in enumerate(texts, 1):
        delta = {"content_index": 0, "delta": t, "item_id": item, "logprobs": [], "output_index": 0,
                 "sequence_number": i, "type": "response.output_text.delta"}  # fmt: skip
        reads.append(_event("response.output_text.delta", delta))
    usage = {"input_tokens": 12, "output_tokens": len(texts)}
    done = {"response": {"id": "resp_1", "status": "completed", "usage": usage},
            "sequence_number": len(texts) + 1, "type": "response.completed"}  # fmt: skip
    return [*reads, _event("response.completed", done)]


def messages(texts: list[str]) -> list[bytes]:
    start = {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 12}}}
    reads = [_event("message_start", start)]
    for t in texts:
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}
        reads.append(_event("content_block_delta", delta))
    end = {
        "type": "message_delta",
        "delta": {"stop_reason": "max_tokens"},
        "usage": {"output_tokens": len(texts)},
    }
    return [*reads, _event("message_delta", end), _event("message_stop", {"type": "message_stop"})]


APIS: dict[str, tuple[Any, EventApplier]] = {
    "chat": (chat, apply_chunk),
    "responses": (responses, apply_responses_event),
    "messages": (messages, apply_messages_event),
}


async def fold(reads: list[bytes], apply: EventApplier, streams: int) -> float:
    """Seconds to fold ``streams`` answers of ``reads`` through the exchange."""
    framed = [b"%x\r\n%b\r\n" % (len(r), r) for r in reads]
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    pool = ConnectionPool("http://127.0.0.1:9/v1", tls, connect_timeout_s=1, read_timeout_s=5)
    session = StreamSession(apply)
    t0 = time.perf_counter()
    for _ in range(streams):
        conn = Connection(pool)
        conn.connection_made(NullWire())  # type: ignore[arg-type]
        acc = StreamAccumulator()
        record = RequestRecord(request_id=1, worker=0, seq=0, level_id=1, sent_ns=0)
        exchange = protocol_request._Exchange(session, record, acc, False, conn)
        conn.send(exchange, b"")
        conn.data_received(HEAD)
        for data in framed:
            conn.data_received(data)
        conn.data_received(b"0\r\n\r\n")
        conn.abort()
        if exchange.outcome.exception() is not None or not acc.done:
            raise SystemExit(f"the stream did not complete: {exchange.outcome.exception()!r}")
    return time.perf_counter() - t0


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=256, help="text chunks per answer")
    ap.add_argument("--streams", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    texts = [f" tok{i % 97}" for i in range(args.tokens)]
    chunks = args.tokens * args.streams
    for name, (make, apply) in APIS.items():
        reads = make(texts)
        rates = []
        for tries in (0, protocol_request._LEARN_TRIES):  # without the shape, then with it
            saved, protocol_request._LEARN_TRIES = protocol_request._LEARN_TRIES, tries
            try:
                best = min([await fold(reads, apply, args.streams) for _ in range(args.repeat)])
            finally:
                protocol_request._LEARN_TRIES = saved
            rates.append(chunks / best)
        us = 1e6 / rates[1]
        print(f"{name:9} full decode {rates[0]:>9,.0f} chunks/s   shape {rates[1]:>9,.0f} chunks/s   "
              f"x{rates[1] / rates[0]:.2f}  ({us:.2f} us per chunk, best of {args.repeat})")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
