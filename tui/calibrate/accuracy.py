"""Joining the requests log with the paced server's truth log: the client-added ITL error per chunk."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

# --- joining the two logs -----------------------------------------------------------------------


def read_jsonl(path: Path) -> Iterable[dict[str, Any]]:
    """The objects of a JSON-lines file (a torn last line, from a writer stopped mid-line, is skipped)."""
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(obj, dict):
                    yield obj


@dataclass(frozen=True)
class JoinedErrors:
    """Client-added ITL errors from joining a requests log with a server truth log."""

    errors_ns: np.ndarray
    """One per chunk gap: client gap minus server gap (ns; positive: the client saw the gap longer)."""
    requests: int
    """Requests matched on both sides."""
    unmatched: int
    """Finished requests with no truth record, or whose chunk counts disagree."""

    def summary(self) -> ErrorStats:
        return ErrorStats.of(self.errors_ns, self.requests, self.unmatched)


@dataclass(frozen=True)
class ErrorStats:
    """Percentiles of the client-added ITL error (ms)."""

    chunks: int
    requests: int
    unmatched: int
    p50_ms: float
    """Median of the signed error (the bias)."""
    p99_abs_ms: float
    """99th percentile of the absolute error (the spread)."""
    max_abs_ms: float

    @classmethod
    def of(cls, errors_ns: np.ndarray, requests: int = 0, unmatched: int = 0) -> ErrorStats:
        if errors_ns.size == 0:
            nan = float("nan")
            return cls(0, requests, unmatched, nan, nan, nan)
        ms = errors_ns / 1e6
        absolute = np.abs(ms)
        return cls(
            chunks=int(ms.size),
            requests=requests,
            unmatched=unmatched,
            p50_ms=float(np.percentile(ms, 50)),
            p99_abs_ms=float(np.percentile(absolute, 99)),
            max_abs_ms=float(absolute.max()),
        )


def join_errors(
    truth: Iterable[dict[str, Any]],
    requests: Iterable[dict[str, Any]],
    *,
    window_ns: tuple[int, int] | None = None,
) -> JoinedErrors:
    """Join server truth records and client request records on ``client_request_id``; return every chunk
    gap's client-added error. With ``window_ns``, only gaps whose two server writes both fall inside it count.

    A request the client finished (``ok``) must have exactly as many chunks on both sides, or it is counted
    as unmatched and skipped; a cancelled or failed one contributes the chunks both sides saw (TCP keeps
    their order, so the client's chunks are a prefix of the server's).
    """
    server: dict[str, np.ndarray] = {}
    for rec in truth:
        rid = rec.get("client_request_id")
        chunks = rec.get("chunk_ns") or []
        if rid is not None and len(chunks) >= 2:
            server[str(rid)] = np.asarray(chunks, dtype=np.int64)
    parts: list[np.ndarray] = []
    matched = unmatched = 0
    for rec in requests:
        client = rec.get("chunk_ns") or []
        sn = server.get(str(rec.get("client_request_id")))
        if sn is None:
            if rec.get("status") == "ok":
                unmatched += 1
            continue
        cn = np.asarray(client, dtype=np.int64)
        if rec.get("status") == "ok" and cn.size != sn.size:
            unmatched += 1
            continue
        n = min(cn.size, sn.size)
        if n < 2:
            continue
        matched += 1
        cn, sn = cn[:n], sn[:n]
        err = np.diff(cn) - np.diff(sn)
        if window_ns is not None:
            lo, hi = window_ns
            keep = (sn[:-1] >= lo) & (sn[1:] <= hi)
            err = err[keep]
        parts.append(err)
    errors = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return JoinedErrors(errors, matched, unmatched)


def join_files(
    truth_path: Path, requests_path: Path, *, window_ns: tuple[int, int] | None = None
) -> JoinedErrors:
    """`join_errors` over the two JSON-lines files."""
    return join_errors(read_jsonl(truth_path), read_jsonl(requests_path), window_ns=window_ns)
