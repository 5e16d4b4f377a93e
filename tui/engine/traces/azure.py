"""Azure's LLM inference traces (2023, 2024): ``TIMESTAMP,ContextTokens,GeneratedTokens``, the timestamp a
date and time of day to 100 ns (``2023-11-16 18:15:46.6805900``), kept to the last digit."""

from __future__ import annotations

import calendar

from tui.engine.traces.csv_columns import Columns
from tui.engine.traces.protocol import TraceRequest, seconds_ns, whole

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def timestamp_ns(text: str) -> int:
    """``YYYY-MM-DD HH:MM:SS[.fraction]`` (a ``T`` or a trailing ``Z`` allowed), as nanoseconds since the
    epoch (UTC), exact to the digits given; a bare number is read as seconds."""
    t = text.strip().rstrip("Z").replace("T", " ")
    date, sep, clock = t.partition(" ")
    if not sep:
        return seconds_ns("TIMESTAMP", t)
    try:
        year, month, day = (int(p) for p in date.split("-"))
        hms, _, frac = clock.partition(".")
        hour, minute, second = (int(p) for p in hms.split(":"))
        if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
            raise ValueError
        if frac and not frac.isdigit():
            raise ValueError
    except ValueError:
        raise ValueError(f"TIMESTAMP is not a date and time: {text.strip()!r}") from None
    epoch_s = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    return epoch_s * 1_000_000_000 + int((frac + "0" * 9)[:9])


class AzureReader:
    """Columns by the header's names, in any order."""

    def __init__(self, header: str) -> None:
        self.columns = Columns(header, COLUMNS)

    def parse(self, line: str) -> TraceRequest:
        c = self.columns
        parts = c.fields(line)
        return TraceRequest(
            at_ns=timestamp_ns(c.get(parts, "TIMESTAMP")),
            input_tokens=whole("ContextTokens", c.get(parts, "ContextTokens")),
            output_tokens=whole("GeneratedTokens", c.get(parts, "GeneratedTokens")),
        )
