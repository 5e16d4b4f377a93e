"""The level table as CSV: one row per level, the columns the results' level keys (nested objects spread to
``parent.child`` columns), so a spreadsheet reads the same figures as the JSON."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from tui.engine.results.codec import encode
from tui.engine.results.files import write_atomic
from tui.engine.results.model import Results

NOT_IN_CSV = frozenset({"histograms"})
"""Level keys left out of the CSV: bucket counts are no table cell (they are in the results JSON)."""


def _flat(level: Mapping[str, Any]) -> dict[str, Any]:
    """A level's keys as CSV cells: nested objects spread to ``parent.child`` columns, except ``errors``
    (its keys vary by level), which stays one JSON cell, and the `NOT_IN_CSV` keys."""
    out: dict[str, Any] = {}
    for key, value in level.items():
        if key in NOT_IN_CSV:
            continue
        if isinstance(value, Mapping) and key != "errors":
            for sub, v in value.items():
                out[f"{key}.{sub}"] = v
        else:
            out[key] = value
    return out


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping | Sequence) and not isinstance(value, str):
        return orjson.dumps(value).decode()
    return str(value)


def levels_csv(results: Results) -> str:
    """The level table: one row per level, the header the results' level keys (in their order, the union
    over levels: rate levels have a few more). A null (a rate too short to measure) is an empty cell."""
    rows = [_flat(encode(level)) for level in results.levels]
    header: dict[str, None] = {}
    for row in rows:
        header.update(dict.fromkeys(row))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(header))
    for row in rows:
        writer.writerow([_cell(row.get(key)) for key in header])
    return buf.getvalue()


def write_csv(results: Results, path: Path) -> Path:
    """Write `levels_csv` to ``path`` (whole or not at all)."""
    return write_atomic(path, levels_csv(results).encode())
