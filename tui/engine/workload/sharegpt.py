"""ShareGPT-format datasets: a JSON array of ``{"conversations": [{"from": "human", "value": ...}, ...]}``.

The prompt is the first human turn; the output length asked for is the length of the reply that follows it,
**in words** (whitespace-separated; no tokenizer is at hand, and by the synthetic rule a word is about a
token). Entries without a human turn followed by a reply are skipped, as vLLM's and aiperf's loaders do (the
public ShareGPT files have many); a file with none left is an error.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson

from tui.engine.workload.entries import DatasetError, Entry, line_of

HUMAN = frozenset({"human", "user"})
REPLY = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})


def parse_sharegpt(path: str, data: bytes) -> list[Entry]:
    """Every usable entry of a ShareGPT file; `DatasetError` names the line of the first broken one."""
    try:
        items = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        line = line_of(data, exc.pos) if isinstance(exc.pos, int) else None
        raise DatasetError(path, f"not valid JSON ({exc.msg}); is it --dataset-format jsonl?", line) from None
    if not isinstance(items, list):
        raise DatasetError(path, "a ShareGPT file is a JSON array of conversations", 1)
    out = []
    for i, item in enumerate(items):
        try:
            entry = sharegpt_entry(item)
        except ValueError as exc:
            raise DatasetError(path, f"entry {i + 1}: {exc}", _item_line(data, i)) from None
        if entry is not None:
            out.append(entry)
    return out


def sharegpt_entry(item: Any) -> Entry | None:
    """An entry's prompt and reply length; None when it has no human turn answered; ValueError when broken."""
    if not isinstance(item, dict):
        raise ValueError('not an object (want {"conversations": [...]})')
    turns = item.get("conversations")
    if not isinstance(turns, list):
        raise ValueError('"conversations" must be a list')
    for t in turns:
        if (
            not isinstance(t, dict)
            or not isinstance(t.get("from"), str)
            or not isinstance(t.get("value"), str)
        ):
            raise ValueError('every turn needs string "from" and "value"')
    for first, second in itertools.pairwise(turns):
        if first["from"] in HUMAN and first["value"].strip():
            if second["from"] not in REPLY:
                return None
            words = len(second["value"].split())
            return Entry(prompt=first["value"], output_tokens=max(1, words))
    return None


def _item_line(data: bytes, index: int) -> int | None:
    """The line where array item ``index`` starts: found only on the error path, by walking the array with
    the standard library's decoder (which reports where each value ends)."""
    text = data.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    for i in range(index + 1):
        while text[pos] in " \t\r\n,":
            pos += 1
        if i == index:
            return line_of(text, pos)
        _, pos = decoder.raw_decode(text, pos)
    return None
