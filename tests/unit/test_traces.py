"""The trace readers on small traces the tests write: each format's fields, exact timestamps, the slice, the
loop, each worker's share, and bad lines skipped with a notice naming the file and line."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from tui.engine.config import TraceConfig, WorkloadConfig
from tui.engine.traces import TraceError, TraceFeed, check_trace
from tui.engine.traces.azure import timestamp_ns
from tui.engine.traces.protocol import TraceRequest
from tui.engine.workload.protocol import RequestKey
from tui.engine.workload.trace import TraceWorkload


def mooncake(path: Path, rows: Sequence[Mapping[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def feed(path: Path, **kwargs: object) -> tuple[list[TraceRequest], list[str]]:
    notices: list[str] = []
    config = check_trace(TraceConfig(path=str(path), **kwargs))  # type: ignore[arg-type]
    return list(TraceFeed(config, notice=notices.append)), notices


def test_mooncake_fields_and_times_relative_to_the_first(tmp_path: Path) -> None:
    path = mooncake(tmp_path / "t.jsonl", [
        {"timestamp": 1000, "input_length": 700, "output_length": 20, "hash_ids": [1, 2]},
        {"timestamp": 1250, "input_length": 30, "output_length": 5, "hash_ids": [1], "session_id": "s1"},
        {"timestamp": 1250.5, "input_length": 9, "output_length": 1, "hash_ids": []},
    ])  # fmt: skip
    reqs, notices = feed(path)
    assert notices == []
    assert [(r.at_ns, r.input_tokens, r.output_tokens, r.hash_ids) for r in reqs] == [
        (0, 700, 20, (1, 2)),
        (250_000_000, 30, 5, (1,)),
        (250_500_000, 9, 1, ()),
    ]
    assert reqs[1].session_id == "s1" and [r.line for r in reqs] == [1, 2, 3]


def test_azure_keeps_the_timestamps_full_resolution(tmp_path: Path) -> None:
    path = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:46.6805901,396,109\n"
        "2023-11-16 18:15:50.0000000,879,11\n"
    )
    reqs, _ = feed(path)
    assert check_trace(TraceConfig(path=str(path))).format == "azure"
    assert [r.at_ns for r in reqs] == [0, 100, 3_319_410_000]  # 100 ns apart: not cut to 10 ms
    assert [(r.input_tokens, r.output_tokens) for r in reqs] == [(374, 44), (396, 109), (879, 11)]
    assert timestamp_ns("1970-01-01 00:00:01.5") == 1_500_000_000


def test_burstgpt_columns_by_name_and_the_model_filter(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "45,GPT-4,1087,230,1317,Conversation log\n"
        "46.25,ChatGPT,417,276,693,API log\n"
    )
    reqs, _ = feed(path)
    assert [(r.at_ns, r.input_tokens, r.output_tokens) for r in reqs] == [
        (0, 472, 18), (40_000_000_000, 1087, 230), (41_250_000_000, 417, 276),
    ]  # fmt: skip
    only, _ = feed(path, model="chatgpt")
    assert [(r.at_ns, r.input_tokens) for r in only] == [(0, 472), (41_250_000_000, 417)]


def test_bad_lines_are_skipped_with_the_file_and_line_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"timestamp": 8, "input_length": 10, "output_length": 2}\n'
        '{"timestamp": 10, "output_length": 2}\n'
        '{"timestamp": 20, "input_length": "ten", "output_length": 2}\n'
        '{"timestamp": 30, "input_length": -4, "output_length": 2}\n'
        '{"timestamp": 5, "input_length": 10, "output_length": 2}\n'
        "not json\n"
        '{"timestamp": 40, "input_length": 11, "output_length": 3}\n'
    )
    reqs, notices = feed(path)
    assert [(r.line, r.input_tokens) for r in reqs] == [(1, 10), (7, 11)]  # nothing for lines 2-6
    (said,) = notices  # one line for the first few, the first one's reason
    assert said.startswith(f"{path}:2: ") and "input_length" in said
    assert said.endswith("line skipped, nothing sent for it; also lines 3, 4, 5, 6 (more are counted at the "
                         "end of the pass)")  # fmt: skip


def test_a_long_trace_with_bad_lines_spread_through_it_is_two_lines_and_flat_memory(tmp_path: Path) -> None:
    """10,000 lines (0.8 MB), a bad one every 1,000: streamed (the peak of Python allocations stays far under
    the file's size, as it would for millions), every good line sent, the bad ones named (the first few)
    and counted, once."""
    import tracemalloc

    path = tmp_path / "long.jsonl"
    row = '{{"timestamp": {}, "input_length": 10, "output_length": 2, "hash_ids": [1, 2, 3, 4, 5, 6]}}\n'
    bad = '{{"timestamp": {}, "output_length": 2}}\n'
    path.write_text("".join((bad if i % 1000 == 999 else row).format(i) for i in range(10_000)))
    notices: list[str] = []
    config = check_trace(TraceConfig(path=str(path)))
    tracemalloc.start()
    try:
        sent = sum(1 for _ in TraceFeed(config, notice=notices.append))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sent == 9_990 and peak < 200_000, peak
    first, total = notices
    assert first.startswith(f"{path}:1000: ") and "input_length" in first
    assert first.endswith("also lines 2000, 3000, 4000, 5000 (more are counted at the end of the pass)")
    assert total == f"{path}: 10 bad lines skipped in all"


def test_a_first_request_that_is_bad_is_one_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,abc,4\n")
    with pytest.raises(TraceError, match=rf"^{path}:2: ContextTokens is not a number: 'abc'$"):
        check_trace(TraceConfig(path=str(path)))
    path.write_text("Timestamp,Model\n1,x\n")
    with pytest.raises(TraceError, match="cannot tell the trace's format"):
        check_trace(TraceConfig(path=str(path)))
    with pytest.raises(TraceError, match="no such file"):
        check_trace(TraceConfig(path=str(tmp_path / "none.jsonl")))


def test_slice_loop_and_each_workers_share(tmp_path: Path) -> None:
    rows = [{"timestamp": 100 * i, "input_length": i + 1, "output_length": 1} for i in range(10)]
    path = mooncake(tmp_path / "t.jsonl", rows)
    sliced, _ = feed(path, start_s=0.2, duration_s=0.3)
    assert [(r.at_ns, r.input_tokens) for r in sliced] == [(0, 3), (100_000_000, 4), (200_000_000, 5)]
    config = check_trace(TraceConfig(path=str(path), loop=True))
    looped = TraceFeed(config)
    first = [r for _, r in zip(range(12), looped, strict=False)]
    # the second pass starts one mean gap after the first's last request
    assert [r.at_ns // 1_000_000 for r in first[9:]] == [900, 1000, 1100]
    shares = [[r.input_tokens for r in TraceFeed(replace(config, loop=False), worker=w, workers=3)]
              for w in range(3)]  # fmt: skip
    assert shares == [[1, 4, 7, 10], [2, 5, 8], [3, 6, 9]]


def test_shared_hash_ids_give_the_same_leading_text(tmp_path: Path) -> None:
    path = mooncake(tmp_path / "t.jsonl", [
        {"timestamp": 0, "input_length": 40, "output_length": 1, "hash_ids": [5, 6, 7]},
        {"timestamp": 1, "input_length": 30, "output_length": 1, "hash_ids": [5, 6, 9]},
        {"timestamp": 2, "input_length": 30, "output_length": 1, "hash_ids": [8, 6, 7]},
    ])  # fmt: skip
    trace = check_trace(TraceConfig(path=str(path), block_size=16))
    workload = TraceWorkload(WorkloadConfig(trace=trace))
    prompts = [
        workload.next_request(RequestKey(0, i, None, r)).prompt for i, r in enumerate(TraceFeed(trace))
    ]
    words = [p.split() for p in prompts if p is not None]
    assert [len(w) for w in words] == [40, 30, 30]  # one word a token before any answer
    assert words[1] == words[0][:30]  # blocks 5 and 6 alike (block 9 lies past its 30 tokens)
    assert words[2][:16] != words[0][:16] and words[2][16:30] == words[0][16:30]  # block 8, then 6 again


def test_each_runs_prompt_salt_is_in_every_block_and_text(tmp_path: Path) -> None:
    """A second replay of the same trace must find nothing of the first in a prefix cache (llama.cpp served
    98 % of a rerun's prompt tokens when the blocks followed the seed alone)."""
    path = mooncake(tmp_path / "t.jsonl", [
        {"timestamp": 0, "input_length": 32, "output_length": 1, "hash_ids": [5, 6]},
        {"timestamp": 1, "input_length": 32, "output_length": 1},
    ])  # fmt: skip
    trace = check_trace(TraceConfig(path=str(path), block_size=16))

    def prompts(salt: str) -> list[str | None]:
        workload = TraceWorkload(WorkloadConfig(trace=trace, prompt_salt=salt))
        return [
            workload.next_request(RequestKey(0, i, None, r)).prompt for i, r in enumerate(TraceFeed(trace))
        ]

    first, again, other = prompts("aaaa0001"), prompts("aaaa0001"), prompts("bbbb0002")
    assert first == again
    assert all(
        a is not None and b is not None and a.split()[0] != b.split()[0]
        for a, b in zip(first, other, strict=True)
    )


def test_the_timestamp_unit_can_be_given(tmp_path: Path) -> None:
    path = mooncake(tmp_path / "t.jsonl", [
        {"timestamp": 61.114, "input_length": 5, "output_length": 1},
        {"timestamp": "62.5", "input_length": 5, "output_length": 1},
    ])  # fmt: skip
    reqs, _ = feed(path, time_unit="s")
    assert [r.at_ns for r in reqs] == [0, 1_386_000_000]
    reqs, _ = feed(path)  # Mooncake's own unit: ms
    assert [r.at_ns for r in reqs] == [0, 1_386_000]
