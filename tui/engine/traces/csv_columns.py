"""The CSV traces' shared part: a header names the columns, each data line is split by it."""

from __future__ import annotations

import csv


def split_line(line: str) -> list[str]:
    """One CSV line's fields (a plain split unless it quotes)."""
    if '"' in line:
        return next(csv.reader([line]), [])
    return line.split(",")


class Columns:
    """Where each wanted column is in a header; `ValueError` naming those it lacks."""

    def __init__(self, header: str, wanted: tuple[str, ...]) -> None:
        names = [n.strip().strip("\ufeff").lower() for n in split_line(header)]
        missing = [w for w in wanted if w.lower() not in names]
        if missing:
            raise ValueError(f"header lacks {', '.join(missing)} (has {', '.join(names) or 'nothing'})")
        self.index = {w: names.index(w.lower()) for w in wanted}
        self.width = max(self.index.values()) + 1

    def fields(self, line: str) -> list[str]:
        """``line``'s fields; `ValueError` when it has too few for the wanted columns."""
        parts = split_line(line)
        if len(parts) < self.width:
            raise ValueError(f"{len(parts)} fields, want at least {self.width}")
        return parts

    def get(self, parts: list[str], name: str) -> str:
        value = parts[self.index[name]].strip()
        if not value:
            raise ValueError(f"{name} is empty")
        return value
