"""A session as another tool's input: a Mooncake-style trace of its requests (the format AIPerf, GuideLLM,
vLLM's and SGLang's benches replay), and its results rebuilt by replaying it (for the results exports:
vLLM, CSV, llm-d)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from tui.engine.host.playback_engine import PlaybackEngine
from tui.engine.recording.file import read_session

if TYPE_CHECKING:
    from tui.engine.results.model import Results

MOONCAKE_BLOCK = 512
"""Tokens per ``hash_ids`` block, as Mooncake's traces count them."""


def to_mooncake(path: Path) -> list[str]:
    """One JSON line per request sent, in send order: ``timestamp`` (ms from the first send),
    ``input_length``, ``output_length`` and ``hash_ids`` (the shared prefix's whole blocks share their ids
    across requests; every other block is the request's own)."""
    replay = PlaybackEngine(read_session(path))
    shared_tokens = replay.config.workload.shared_prefix
    decode = replay.config.decoder
    records = []
    for e in replay.session.events:
        if e.get("k") == "b":
            for rec in decode._build("Batch", e["b"]).records:
                if rec.status == "ok" and rec.input_tokens is not None:
                    records.append(rec)
    records.sort(key=lambda r: r.sent_ns)
    if not records:
        return []
    t0 = records[0].sent_ns
    shared_blocks = shared_tokens // MOONCAKE_BLOCK
    next_id = shared_blocks
    lines = []
    for rec in records:
        blocks = max(1, math.ceil(rec.input_tokens / MOONCAKE_BLOCK))
        own = blocks - min(shared_blocks, blocks)
        ids = list(range(min(shared_blocks, blocks))) + list(range(next_id, next_id + own))
        next_id += own
        out = rec.output_tokens if rec.output_tokens is not None else len(rec.chunk_ns)
        lines.append(json.dumps({
            "timestamp": (rec.sent_ns - t0) // 1_000_000,
            "input_length": rec.input_tokens,
            "output_length": out,
            "hash_ids": ids,
        }))  # fmt: skip
    return lines


def session_results(path: Path) -> Results:
    """The results document of the session at ``path``, rebuilt by replaying it to its end (a session cut
    short: up to its cut, marked interrupted)."""
    session = read_session(path)
    return PlaybackEngine(session).run_to_end().results(interrupted="cut short" if session.cut else None)


def is_session(path: Path) -> bool:
    """``path`` starts as a session does (gzip), not as a results file (JSON)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:
        return False
