"""How much of a trace's prompts a prefix cache may serve by the trace's own design: the tokens inside the
blocks its requests name (Mooncake ``hash_ids``), each the same text wherever it appears in a run."""

from __future__ import annotations

from itertools import islice

from tui.engine.config import TraceConfig
from tui.engine.traces.feed import TraceFeed
from tui.engine.traces.protocol import TraceError

SAMPLE_REQUESTS = 5000
"""Requests read from the start of the trace's slice (a bounded read, tens of ms, once a run)."""


def named_block_share(trace: TraceConfig, sample: int = SAMPLE_REQUESTS) -> float:
    """The share of prompt tokens that lie in named blocks, over the first ``sample`` requests: what an
    earlier request with the same leading ids, or an earlier pass of the trace, may have left in the cache.
    0 for a trace without ids (Azure, BurstGPT: every prompt starts with words of its own)."""
    named = total = 0
    try:
        for entry in islice(TraceFeed(trace), sample):
            total += entry.input_tokens
            named += min(len(entry.hash_ids) * trace.block_size, entry.input_tokens)
    except (TraceError, OSError, ValueError):
        return 0.0
    return named / total if total else 0.0
