"""Datasets: every format loads (the samples in tests/data), the workload walks them reproducibly, and every
broken file is one `DatasetError` line naming the file and the line. The subprocess half (exit status 2,
one line on stderr) is in tests/integration/test_workload_bench.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.engine.config import DatasetConfig, WorkloadConfig
from tui.engine.workload import (
    DatasetError,
    DatasetWorkload,
    Message,
    RequestKey,
    check_dataset,
    load_dataset,
)
from tui.engine.workload.dataset import sniff_format

DATA = Path(__file__).resolve().parents[1] / "data"
JSONL, SHAREGPT, TEXT = (
    str(DATA / "sample.jsonl"),
    str(DATA / "sharegpt_sample.json"),
    str(DATA / "prompts.txt"),
)


def test_jsonl_loads_prompts_chats_and_output_lengths() -> None:
    fmt, entries = load_dataset(JSONL)
    assert fmt == "jsonl" and len(entries) == 5  # the blank line is skipped
    assert entries[0].prompt == "Explain why the sky is blue in two short sentences."
    assert [e.output_tokens for e in entries] == [24, None, 8, 20, None]
    assert entries[2].messages == (
        Message("system", "You answer briefly."),
        Message("user", "What is the capital of France?"),
    )


def test_sharegpt_takes_the_first_human_turn_and_the_reply_length_in_words() -> None:
    fmt, entries = load_dataset(SHAREGPT)
    assert fmt == "sharegpt"
    assert [e.prompt for e in entries] == [
        "How do I boil an egg so the yolk stays soft?",
        "Name a planet with rings.",
    ]
    # "Put the egg into boiling water for six minutes, then cool it in cold water." is 15 words
    assert [e.output_tokens for e in entries] == [15, 1]


def test_text_is_one_prompt_per_line() -> None:
    fmt, entries = load_dataset(TEXT)
    assert fmt == "text" and len(entries) == 3
    assert entries[1].prompt == "Describe a lighthouse in one sentence." and entries[1].output_tokens is None


def test_the_format_is_sniffed_by_name_then_by_first_character() -> None:
    assert sniff_format("a.jsonl", b"") == "jsonl" and sniff_format("a.json", b"") == "sharegpt"
    assert sniff_format("a.txt", b"{") == "text"
    assert [sniff_format("data", b) for b in (b" [", b"{", b"hello")] == ["sharegpt", "jsonl", "text"]


def test_check_dataset_fills_in_what_the_workers_need() -> None:
    checked = check_dataset(DatasetConfig(path=JSONL))
    assert (checked.format, checked.entries, checked.chat) == ("jsonl", 5, True)
    assert checked.size_bytes == Path(JSONL).stat().st_size


def _workload(path: str, order: str = "sequential", workers: int = 1, seed: int = 0) -> DatasetWorkload:
    ds = check_dataset(DatasetConfig(path=path, order=order))  # type: ignore[arg-type]
    return DatasetWorkload(WorkloadConfig(osl=33, seed=seed, dataset=ds), workers=workers)


def test_requests_walk_the_file_in_order_across_workers() -> None:
    w0, w1 = _workload(TEXT, workers=2), _workload(TEXT, workers=2)
    _, entries = load_dataset(TEXT)
    sent = []
    for seq in range(3):
        for worker, w in ((0, w0), (1, w1)):
            sent.append(w.next_request(RequestKey(worker, seq)).prompt)
    assert sent == [e.prompt for e in entries] * 2
    spec = w0.next_request(RequestKey(0, 0))
    assert spec.max_tokens == 33 and spec.expected_input_tokens == 10  # --osl, and the word count


def test_each_entry_keeps_its_own_output_length_and_chat_messages() -> None:
    w = _workload(JSONL)
    specs = [w.next_request(RequestKey(0, s)) for s in range(5)]
    assert [s.max_tokens for s in specs] == [24, 33, 8, 20, 33]
    assert specs[2].messages is not None and specs[2].prompt is None


def test_shuffle_is_reproducible_with_the_seed() -> None:
    def order(seed: int) -> list[str]:
        w = _workload(JSONL, "shuffle", seed=seed)
        return [w.next_request(RequestKey(0, s)).prompt or "chat" for s in range(5)]

    assert order(1) == order(1)
    assert sorted(order(1)) == sorted(order(2))
    assert any(order(1) != order(s) for s in (2, 3, 4))


def test_a_worker_refuses_a_file_changed_since_it_was_checked(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("one\ntwo\n")
    ds = check_dataset(DatasetConfig(path=str(path)))
    path.write_text("one\ntwo\nthree\n")
    with pytest.raises(DatasetError, match="changed since it was checked"):
        DatasetWorkload(WorkloadConfig(dataset=ds))


BROKEN = [
    ("x.jsonl", '{"prompt": "ok"}\n{"prompt": "ok"\n', None, "x.jsonl line 2: not valid JSON"),
    ("x.jsonl", '{"prompt": "ok"}\n\n[1, 2]\n', None, "x.jsonl line 3: not a JSON object"),
    ("x.jsonl", '{"text": "hi"}\n', None, 'x.jsonl line 1: has neither "prompt" nor "messages"'),
    ("x.jsonl", '{"prompt": ""}\n', None, 'x.jsonl line 1: "prompt" must be a non-empty string'),
    (
        "x.jsonl",
        '{"prompt": "a", "max_tokens": 0}\n',
        None,
        'x.jsonl line 1: "max_tokens" must be a whole number',
    ),
    ("x.jsonl", '{"messages": []}\n', None, 'x.jsonl line 1: "messages" must be a non-empty list'),
    ("x.jsonl", '{"messages": [{"role": "bot", "content": "a"}]}\n', None, "x.jsonl line 1: message 1: role"),
    ("x.json", '[\n  {"conversations": [}]\n]\n', None, "x.json line 2: not valid JSON"),
    ("x.json", '{"conversations": []}', None, "x.json line 1: a ShareGPT file is a JSON array"),
    ("x.json", '[\n {"conversations": []},\n\n 7\n]', None, "x.json line 4: entry 2: not an object"),
    ("x.json", '[{"conversations": [{"from": "gpt", "value": "a"}]}]', None, "x.json: no usable prompts"),
    ("x.json", '[{"conversations": [{"from": "human"}]}]', None, "x.json line 1: entry 1: every turn needs"),
    ("x.txt", "fine\n\xff\xfe\n", None, "x.txt line 2: not UTF-8 text"),
    ("x.txt", " \n\n", None, "x.txt: the file is empty"),
    ("p.txt", "just words\n", "jsonl", "p.txt line 1: not valid JSON"),  # a wrong format
    ("p.jsonl", '{"prompt": "a"}\n', "sharegpt", "p.jsonl line 1: a ShareGPT file is a JSON array"),
]


@pytest.mark.parametrize(("name", "content", "fmt", "message"), BROKEN)
def test_a_broken_file_is_one_line_naming_file_and_line(
    tmp_path: Path, name: str, content: str, fmt: str | None, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(DatasetError) as info:
        load_dataset(str(path), fmt)  # type: ignore[arg-type]
    text = str(info.value)
    assert text.startswith(str(tmp_path) + "/") and "\n" not in text
    assert message in text


def test_missing_and_directory_are_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"nope\.jsonl: no such file"):
        load_dataset(str(tmp_path / "nope.jsonl"))
    with pytest.raises(DatasetError, match="is a directory"):
        load_dataset(str(tmp_path))
