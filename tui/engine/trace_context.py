"""Each request's W3C trace context, derived from the run's trace key and the request's worker and sequence
number: the worker sends it as ``traceparent`` and the face names the request's span by the same ids from its
record alone, so nothing more crosses the pipes and no id is kept per request."""

from __future__ import annotations

import functools
import hashlib


@functools.lru_cache(maxsize=4)
def _keyed(key: str) -> hashlib.blake2b:
    """The run's keyed hash, copied per request (a copy costs less than keying afresh)."""
    return hashlib.blake2b(key=key.encode(), digest_size=24)


def _digest(key: str, worker: int, seq: int) -> bytes:
    h = _keyed(key).copy()
    h.update(f"{worker}-{seq}".encode())
    return h.digest()


def trace_ids(key: str, worker: int, seq: int) -> tuple[int, int]:
    """(trace id, span id) of request ``worker``-``seq`` of the run keyed ``key``: 128 and 64 bits, never 0
    (W3C's invalid ids)."""
    digest = _digest(key, worker, seq)
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:], "big") or 1


def traceparent(key: str, worker: int, seq: int) -> str:
    """The ``traceparent`` header's value: version 00, the ids, sampled (the server records its spans)."""
    digest = _digest(key, worker, seq)
    if any(digest[:16]) and any(digest[16:]):
        return f"00-{digest[:16].hex()}-{digest[16:].hex()}-01"
    trace_id, span_id = trace_ids(key, worker, seq)
    return f"00-{trace_id:032x}-{span_id:016x}-01"
