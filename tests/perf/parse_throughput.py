"""How many streamed chunks per second one process can take from bytes to an updated request record.

The path timed is exactly the engine's hot path minus the socket: `SSEDecoder.feed` on reads holding several
events, `orjson.loads` on each, `apply_chunk` into a `StreamAccumulator`. The chunks look like vLLM's
chat chunks (id, model, created, one delta, logprobs null, finish_reason null).

    /work/venv/bin/python tests/perf/parse_throughput.py [--chunks-per-read 4] [--chunks 200000]

Target: at least 150k chunks/s.
"""

from __future__ import annotations

import argparse
import time

import orjson

from tui.engine.stream.openai import StreamAccumulator, apply_chunk
from tui.engine.stream.sse import SSEDecoder


def make_reads(n_chunks: int, per_read: int) -> list[bytes]:
    events = []
    for i in range(n_chunks):
        chunk = {
            "id": "chatcmpl-5b1a6c0f0c8a4b6d9c2e7f1a3d4b5c6e",
            "object": "chat.completion.chunk",
            "created": 1735689600,
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "choices": [
                {"index": 0, "delta": {"content": f" tok{i % 97}"}, "logprobs": None, "finish_reason": None}
            ],
        }
        events.append(b"data: " + orjson.dumps(chunk) + b"\n\n")
    return [b"".join(events[i : i + per_read]) for i in range(0, len(events), per_read)]


def run(reads: list[bytes], requests: int) -> float:
    """Seconds to push ``reads`` through the hot path, split evenly over ``requests`` streams."""
    per_request = max(1, len(reads) // requests)
    loads = orjson.loads
    t0 = time.perf_counter()
    for r in range(0, len(reads), per_request):
        decoder = SSEDecoder()
        acc = StreamAccumulator()
        feed = decoder.feed
        for data in reads[r : r + per_request]:
            now = time.perf_counter_ns()
            for event in feed(data):
                if event.data == "[DONE]":
                    break
                apply_chunk(acc, loads(event.data), now)
            if len(acc.pending_text) > 64:
                acc.pending_text.clear()  # the worker takes lane text every batch
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=200_000)
    ap.add_argument("--chunks-per-read", type=int, default=4)
    ap.add_argument("--requests", type=int, default=200, help="streams the chunks are spread over")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    reads = make_reads(args.chunks, args.chunks_per_read)
    best = min(run(reads, args.requests) for _ in range(args.repeat))
    rate = args.chunks / best
    print(
        f"parse throughput: {rate:,.0f} chunks/s "
        f"({args.chunks_per_read} chunks per read, {1e6 / rate:.2f} us per chunk, best of {args.repeat})"
    )


if __name__ == "__main__":
    main()
