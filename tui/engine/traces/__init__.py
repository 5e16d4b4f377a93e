"""Trace files to replay (`--trace`): one reader per format (Mooncake JSONL, Azure and BurstGPT CSV) behind
one line protocol, and the feed that streams a file's requests to each worker. Runs in the worker process
(and, for `check_trace`, once in the face); imports nothing of either side but the shared config."""

from __future__ import annotations

from tui.engine.traces.feed import TraceFeed, check_trace, sniff_format
from tui.engine.traces.protocol import FORMATS, TraceError, TraceFormat, TraceRequest

__all__ = ["FORMATS", "TraceError", "TraceFeed", "TraceFormat", "TraceRequest", "check_trace", "sniff_format"]
