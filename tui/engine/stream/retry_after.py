"""The ``Retry-After`` header of a 429 or 503 answer, as seconds to wait (RFC 9110 section 10.2.3)."""

from __future__ import annotations

import email.utils
import math
import time


def parse_retry_after(value: str | None, *, now_s: float | None = None) -> float | None:
    """Seconds to wait from ``value``: a number of seconds, or an HTTP date (then relative to ``now_s``,
    the wall clock by default; a date in the past is 0). None when absent or unreadable, so the caller falls
    back to its own back-off rather than trusting garbage."""
    if not value:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    wall = time.time() if now_s is None else now_s
    return max(0.0, when.timestamp() - wall)
