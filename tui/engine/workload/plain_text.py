"""Plain text datasets: one prompt per line (blank lines skipped, surrounding whitespace kept off)."""

from __future__ import annotations

from tui.engine.workload.entries import DatasetError, Entry, line_of


def parse_text(path: str, data: bytes) -> list[Entry]:
    """One entry per non-blank line; a file that is not UTF-8 is named with the first bad line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(path, "not UTF-8 text", line_of(data, exc.start)) from None
    return [Entry(prompt=line.strip()) for line in text.split("\n") if line.strip()]
