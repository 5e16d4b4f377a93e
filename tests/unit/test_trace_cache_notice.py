"""The warm-cache notice over a trace: the blocks a trace names are the same text wherever they appear, so
hits on them are the trace's own sharing and say nothing; hits past them (and the template) still do."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tests.unit.test_metrics import _lv
from tui.engine.config import TraceConfig, WorkloadConfig
from tui.engine.control.checks import CacheCheck, unexpected_hits
from tui.engine.traces import check_trace
from tui.engine.traces.sharing import named_block_share

BLOCK = 48


def _mooncake(path: Path, rows: list[tuple[int, list[int]]]) -> TraceConfig:
    lines = (
        json.dumps({"timestamp": i, "input_length": isl, "output_length": 4, "hash_ids": ids}) + "\n"
        for i, (isl, ids) in enumerate(rows)
    )
    path.write_text("".join(lines))
    return check_trace(TraceConfig(path=str(path), block_size=BLOCK))


def test_a_trace_whose_blocks_cover_its_prompts_may_be_served_whole(tmp_path: Path) -> None:
    # tests/perf/trace_replay.py's shape: 1-4 blocks from a few chains, each prompt 7 tokens short of them
    trace = _mooncake(tmp_path / "t.jsonl", [(48 * n - 7, [c * 10 + b for b in range(n)])
                                             for c in range(3) for n in range(1, 5)])  # fmt: skip
    assert named_block_share(trace) == 1.0
    workload = WorkloadConfig(trace=trace)
    level = replace(_lv(1, 1.0, 100.0), mean_isl=113.0, cache_hit_rate=0.83)
    assert unexpected_hits(level, workload, named_share=1.0) is None
    check = CacheCheck(named_share=named_block_share(trace))
    assert check.notices([level], workload) == []


def test_hits_past_a_traces_named_blocks_are_still_said(tmp_path: Path) -> None:
    # half of each prompt in named blocks, the rest the request's own words: 83% cached is beyond it
    trace = _mooncake(tmp_path / "t.jsonl", [(4 * BLOCK, [i, i + 1]) for i in range(10)])
    share = named_block_share(trace)
    assert share == 0.5
    workload = WorkloadConfig(trace=trace)
    level = replace(_lv(1, 1.0, 100.0), mean_isl=4.0 * BLOCK, cache_hit_rate=0.83)
    message = unexpected_hits(level, workload, named_share=share)
    assert message is not None and "the trace's prompts" in message and "(50%)" in message
    assert "synthetic" not in message
    # within the named half and the template: the trace's own sharing, no notice
    assert unexpected_hits(replace(level, cache_hit_rate=0.6), workload, named_share=share) is None


def test_a_trace_without_block_ids_shares_nothing(tmp_path: Path) -> None:
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    + "".join(f"2023-11-16 18:15:4{i}.0000000,500,20\n" for i in range(5)))  # fmt: skip
    trace = check_trace(TraceConfig(path=str(path)))
    assert named_block_share(trace) == 0.0
    level = replace(_lv(1, 1.0, 100.0), mean_isl=500.0, cache_hit_rate=0.8)
    assert unexpected_hits(level, WorkloadConfig(trace=trace), named_share=0.0) is not None


def test_an_unreadable_trace_allows_nothing_extra(tmp_path: Path) -> None:
    trace = _mooncake(tmp_path / "t.jsonl", [(96, [1, 2])])
    (tmp_path / "t.jsonl").unlink()
    assert named_block_share(trace) == 0.0
