"""The ``traceparent`` a request carries names the span its record makes: W3C's form, the same ids."""

from __future__ import annotations

import re

from tui.engine.trace_context import trace_ids, traceparent

W3C = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-01")


def test_the_header_is_w3c_and_carries_the_spans_ids() -> None:
    seen = set()
    for worker in range(3):
        for seq in range(200):
            header = traceparent("abc123", worker, seq)
            assert W3C.fullmatch(header), header
            trace_id, span_id = trace_ids("abc123", worker, seq)
            assert header == f"00-{trace_id:032x}-{span_id:016x}-01"
            seen.add(trace_id)
    assert len(seen) == 600, "each request a trace of its own"
    assert traceparent("abc123", 0, 0) == traceparent("abc123", 0, 0) != traceparent("abc124", 0, 0)
