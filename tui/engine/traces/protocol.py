"""What every trace reader yields, and how a bad line is reported.

A reader turns one line of its format into a `TraceRequest` (its timestamp in nanoseconds, kept exact from
the file's text, and its lengths) or raises `ValueError` with the reason; `tui.engine.traces.feed` does the
rest for all formats alike: order, slicing, looping, each worker's share and the notices naming the line.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Protocol

TraceFormat = Literal["mooncake", "azure", "burstgpt"]
FORMATS: tuple[TraceFormat, ...] = ("mooncake", "azure", "burstgpt")


class TraceRequest(NamedTuple):
    """One request of a trace (a tuple: a feed makes one per line, and a dataclass costs ~3x as much)."""

    at_ns: int
    """When it arrives: in a reader's output the file's own timestamp; in a feed's, nanoseconds since the
    replay's first request (the slice's start), loops added."""
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    """Mooncake: the prompt's blocks of ``--trace-block-size`` tokens (equal leading ids: equal leading
    text)."""
    session_id: str | None = None
    line: int = 0
    """The line of the file it came from (1 is the first)."""


class TraceError(Exception):
    """A trace that cannot be replayed at all (missing, empty, unknown format, its first request bad): said
    in one line."""


class LineReader(Protocol):
    """Parses the data lines of one format (CSV readers take their column names from the header first)."""

    def parse(self, line: str) -> TraceRequest:
        """The request on ``line`` (``at_ns`` as the file says; ``line`` left 0), or `ValueError(reason)`."""
        ...


def whole(name: str, value: object) -> int:
    """A length field as a non-negative whole number, or `ValueError` naming the field."""
    if isinstance(value, bool):
        raise ValueError(f"{name} is not a number: {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            n = int(text)
        except ValueError:
            try:
                f = float(text)
            except ValueError:
                raise ValueError(f"{name} is not a number: {text!r}") from None
            if not f.is_integer():
                raise ValueError(f"{name} is not a whole number: {text!r}") from None
            n = int(f)
    else:
        raise ValueError(f"{name} is not a number: {value!r}")
    if n < 0:
        raise ValueError(f"{name} is negative: {n}")
    return n


def seconds_ns(name: str, text: str, scale_ns: int = 1_000_000_000) -> int:
    """A decimal number of units of ``scale_ns`` nanoseconds (seconds by default), exact to the nanosecond
    from its digits (a float would round a long timestamp's last digits)."""
    t = text.strip()
    neg = t.startswith("-")
    body = t[1:] if neg or t.startswith("+") else t
    whole_part, _, frac = body.partition(".")
    if not (whole_part or frac) or not (whole_part + frac).isdigit():
        try:
            value = float(t)  # 1e3 and the like
        except ValueError:
            raise ValueError(f"{name} is not a number: {t!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{name} is not a number: {t!r}") from None
        return round(value * scale_ns)
    ns = int(whole_part or "0") * scale_ns
    if frac:
        digits = len(str(scale_ns)) - 1
        ns += int((frac + "0" * digits)[:digits] or "0")
    return -ns if neg else ns
