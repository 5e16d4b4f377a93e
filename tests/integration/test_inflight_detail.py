"""A request opened while it streams: its detail carries the chunk timeline so far, and that timeline is the
start of the one its finished record gives."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.engine_helpers import running_handle, wait_for
from tui.engine.config import LoadTarget, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.snapshot import RequestDetail
from tui.sim.paced import paced_server

pytestmark = pytest.mark.timeout(60)


def _wait_detail(
    handle: EngineHandle, rid: int, pred: Callable[[RequestDetail], bool], timeout_s: float, what: str
) -> RequestDetail:
    """Poll ``handle.detail(rid)`` (every 20 ms, like a face's timer) until ``pred`` holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        detail = handle.detail(rid)
        if detail is not None and pred(detail):
            return detail
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; last: {detail}")
        time.sleep(0.02)


def test_detail_of_a_streaming_request_grows_and_matches_its_record(tmp_path: Path) -> None:
    # one stream at 25 tok/s, 60 tokens: about 2.4 s of chunks 40 ms apart
    with (
        paced_server(25.0) as server,
        running_handle(
            server.url, LoadTarget(concurrency=1), tmp_path, workload=WorkloadConfig(isl=16, osl=60)
        ) as handle,
    ):
        lane, _, _ = wait_for(
            handle,
            lambda s: next((ln for ln in s.lanes if ln.state == "streaming"), None),
            15,
            "a streaming lane",
        )
        assert lane is not None
        rid = lane.request_id

        def streaming_with(n: int) -> Callable[[RequestDetail], bool]:
            return lambda d: d.state == "streaming" and len(d.chunk_offsets_ms) >= n

        early = _wait_detail(handle, rid, streaming_with(3), 10, "3 chunks in flight")
        later = _wait_detail(handle, rid, streaming_with(len(early.chunk_offsets_ms) + 10), 10, "10 more")
        assert later.state == "streaming", "the stream ended before it could be seen growing"
        final = _wait_detail(handle, rid, lambda d: d.state == "ok", 15, "the request to finish")

    for seen in (early, later):
        n = len(seen.chunk_offsets_ms)
        assert seen.e2e_ms is None and seen.chunks_dropped == 0
        assert seen.ttft_ms == pytest.approx(seen.chunk_offsets_ms[0])
        assert seen.itl_chunk.n == n - 1 and len(seen.chunk_tokens) == n
        assert seen.output_tokens == n  # the paced server counts only at the end: one per chunk so far
        assert seen.tpot_ms is not None and 20.0 < seen.tpot_ms < 80.0  # paced 40 ms apart
        assert 20.0 < seen.itl_chunk.p50 < 80.0
        # what was seen in flight is exactly the start of the finished request's timeline
        assert seen.chunk_offsets_ms == pytest.approx(final.chunk_offsets_ms[:n], abs=1e-6)
        assert seen.ttft_ms == pytest.approx(final.ttft_ms, abs=1e-6)
    assert later.chunk_offsets_ms[: len(early.chunk_offsets_ms)] == early.chunk_offsets_ms
    assert len(final.chunk_offsets_ms) == 60 and final.output_tokens == 60
    assert final.itl_chunk.n == 59 and final.e2e_ms is not None and final.chunks_dropped == 0
