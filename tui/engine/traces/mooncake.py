"""Mooncake's JSONL traces: ``{"timestamp": ms, "input_length": N, "output_length": N, "hash_ids": [...]}``
per line, with an optional ``session_id`` (Alibaba's Bailian traces share the shape, with 16-token blocks).

``hash_ids`` name the prompt's blocks of ``--trace-block-size`` tokens: two requests whose ids agree up to
block k share their first k blocks of prompt, which is what a prefix cache sees.
"""

from __future__ import annotations

import orjson

from tui.engine.traces.protocol import TraceRequest, seconds_ns, whole


class MooncakeReader:
    """One JSON object per line; ``unit_ns``: nanoseconds in one unit of ``timestamp`` (Mooncake's ms)."""

    def __init__(self, unit_ns: int = 1_000_000) -> None:
        self.unit_ns = unit_ns

    def parse(self, line: str) -> TraceRequest:
        """The request on ``line``; `ValueError` for bad JSON, a missing or non-numeric field."""
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        for name in ("timestamp", "input_length", "output_length"):
            if name not in obj:
                raise ValueError(f"no {name!r} field")
        ts = obj["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float, str)):
            raise ValueError(f"timestamp is not a number: {ts!r}")
        u = self.unit_ns
        at_ns = ts * u if isinstance(ts, int) else seconds_ns("timestamp", str(ts), u)
        ids = obj.get("hash_ids") or []
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            raise ValueError("hash_ids is not a list of whole numbers")
        session = obj.get("session_id")
        return TraceRequest(
            at_ns=at_ns,
            input_tokens=whole("input_length", obj["input_length"]),
            output_tokens=whole("output_length", obj["output_length"]),
            hash_ids=tuple(ids),
            session_id=None if session is None else str(session),
        )
