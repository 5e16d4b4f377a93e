"""The ground-truth log: one JSON line per generation request, flushed per line.

Times are `time.perf_counter_ns()` (CLOCK_MONOTONIC, comparable across processes on Linux): see
`GenRequest.truth`. `chunk_ns` is stamped immediately before the `transport.write` of each chunk carrying
generated text; `first_token_ns` is `chunk_ns[0]` for streams and the moment the first token was produced
otherwise (a non-streamed body is logged as one chunk of all its tokens).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import IO, Any

import orjson


class TruthLog:
    """Appends one JSON line per request and flushes it, so a reader sees each request as it ends."""

    def __init__(self, path: Path) -> None:
        self._file: IO[bytes] = path.open("ab")

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(orjson.dumps(record) + b"\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def rejected_record(
    request_id: str,
    client_request_id: str | None,
    arrival_ns: int,
    http_status: int,
    fault: str | None,
    prompt_tokens: int,
    api: str,
) -> dict[str, Any]:
    """The record of a request answered with an error before it reached the scheduler."""
    return {
        "client_request_id": client_request_id,
        "id": request_id,
        "endpoint": api,
        "stream": None,
        "arrival_ns": arrival_ns,
        "admitted_ns": None,
        "first_token_ns": None,
        "chunk_ns": [],
        "chunk_tokens": [],
        "end_ns": time.perf_counter_ns(),
        "prompt_tokens": prompt_tokens,
        "cached_tokens": None,
        "completion_tokens": 0,
        "status": "error",
        "http_status": http_status,
        "fault": fault,
    }


class StateLog:
    """The scheduler's state over time: one JSON line per change of (running, waiting, KV tokens used).

    `{"t_ns": ..., "running": ..., "waiting": ..., "kv_used": ...}`, where `t_ns` is `perf_counter_ns` when
    the state was entered; it holds until the next line. A step function recorded at its edges, so a test
    can take the exact time-average of running and waiting over any window and hold a client's scraped
    average to it. Lines are buffered and flushed every `flush_ns` and on close (the stepper writes at
    most one per step, and only when the state changed).
    """

    def __init__(self, path: Path, flush_ns: int = 200_000_000) -> None:
        self._file: IO[bytes] = path.open("ab")
        self._last: tuple[int, int, int] = (-1, -1, -1)
        self._flush_ns = flush_ns
        self._flushed_ns = 0

    def note(self, t_ns: int, running: int, waiting: int, kv_used: int) -> None:
        """Record the state entered at `t_ns`, if it differs from the last one recorded."""
        state = (running, waiting, kv_used)
        if state == self._last:
            return
        self._last = state
        self._file.write(
            b'{"t_ns":%d,"running":%d,"waiting":%d,"kv_used":%d}\n' % (t_ns, running, waiting, kv_used)
        )
        if t_ns - self._flushed_ns >= self._flush_ns:
            self._file.flush()
            self._flushed_ns = t_ns

    def close(self) -> None:
        self._file.close()
