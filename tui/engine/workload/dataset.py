"""Prompts from a file (`--dataset`): load and check it, and the workload that walks its entries.

The face loads the file once to check it (`load_dataset`: any problem is one `DatasetError` line naming the
file and line) and sends the workers only its path and fingerprint (`DatasetConfig`); each worker loads it
again when its workload is built, before any request. Why not send the parsed prompts in the frozen config:
the config is pickled to every worker and kept by the face for the whole run (results, sessions), so a
100 MB dataset would live in the face twice and go down every worker's pipe at start; re-reading costs each
worker one parse, and the face keeps nothing once it has counted the entries.
"""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

from tui.engine.config import DatasetConfig, DatasetFormat, WorkloadConfig
from tui.engine.workload.entries import DatasetError, Entry
from tui.engine.workload.jsonl import parse_jsonl
from tui.engine.workload.plain_text import parse_text
from tui.engine.workload.protocol import RequestKey, RequestSpec
from tui.engine.workload.sharegpt import parse_sharegpt
from tui.engine.workload.text import word_tokens

if TYPE_CHECKING:
    from tui.engine.records import RequestRecord

PARSERS = {"jsonl": parse_jsonl, "sharegpt": parse_sharegpt, "text": parse_text}


def sniff_format(path: str, data: bytes) -> DatasetFormat:
    """The format a file is in, by its name (``.jsonl``, ``.json``, ``.txt``), else by its first character
    (``[``: ShareGPT, ``{``: JSONL, anything else: text)."""
    lower = path.lower()
    if lower.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if lower.endswith(".json"):
        return "sharegpt"
    if lower.endswith(".txt"):
        return "text"
    head = data.lstrip()[:1]
    return "sharegpt" if head == b"[" else "jsonl" if head == b"{" else "text"


def read_dataset(path: str) -> bytes:
    """The file's bytes; a missing, unreadable or empty file is a `DatasetError`."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise DatasetError(path, "no such file") from None
    except IsADirectoryError:
        raise DatasetError(path, "is a directory, not a dataset file") from None
    except OSError as exc:
        raise DatasetError(path, f"cannot read it ({exc.strerror or exc})") from None
    if not data.strip():
        raise DatasetError(path, "the file is empty")
    return data


def load_dataset(path: str, fmt: DatasetFormat | None = None) -> tuple[DatasetFormat, list[Entry]]:
    """Parse ``path`` as ``fmt`` (None: sniffed); the format used and the entries, never an empty list."""
    data = read_dataset(path)
    fmt = fmt or sniff_format(path, data)
    entries = PARSERS[fmt](path, data)
    if not entries:
        raise DatasetError(path, f"no usable prompts in this {fmt} file")
    return fmt, entries


def check_dataset(config: DatasetConfig) -> DatasetConfig:
    """Load and check the file on the face's side: ``config`` with its format (sniffed when it was None),
    entry count and fingerprint filled in. Raises `DatasetError`."""
    fmt, entries = load_dataset(config.path, config.format)
    st = os.stat(config.path)
    return DatasetConfig(
        path=config.path,
        format=fmt,
        order=config.order,
        entries=len(entries),
        chat=any(e.messages is not None for e in entries),
        size_bytes=st.st_size,
    )


class DatasetWorkload:
    """The entries of a checked dataset, one per request, in file order or shuffled once by the seed.

    Request ``seq`` of worker ``w`` of ``W`` takes position ``seq * W + w`` of that order (mod the entry
    count): over the run, requests walk the order one by one whatever the workers, and no two workers send
    the same entry at the same time. Each entry's own output length wins over ``--osl``.
    """

    wants_replies = False

    def __init__(self, config: WorkloadConfig, *, workers: int = 1) -> None:
        ds = config.dataset
        if ds is None:
            raise ValueError("DatasetWorkload needs WorkloadConfig.dataset")
        self.config = config
        self.workers = max(1, workers)
        _, entries = load_dataset(ds.path, ds.format)
        if ds.size_bytes and (os.stat(ds.path).st_size != ds.size_bytes or len(entries) != ds.entries):
            raise DatasetError(ds.path, "changed since it was checked")
        if ds.order == "shuffle":
            random.Random(f"{config.seed}:dataset").shuffle(entries)
        self.entries = entries
        self._estimates = [word_tokens(e.text) for e in entries]

    def index(self, key: RequestKey) -> int:
        """Which entry request ``key`` takes."""
        return (key.seq * self.workers + key.worker) % len(self.entries)

    def next_request(self, key: RequestKey) -> RequestSpec:
        """Request ``key``'s entry, as a prompt or chat messages."""
        i = self.index(key)
        e = self.entries[i]
        return RequestSpec(
            prompt=e.prompt,
            messages=e.messages,
            max_tokens=e.output_tokens or self.config.osl,
            fixed_osl=self.config.fixed_osl,
            expected_input_tokens=self._estimates[i],
        )

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        """Nothing to learn from an answer."""
