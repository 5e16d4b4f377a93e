"""Keeping the API key out of every message: masked before a message is cut, and after, as a safety net.

A server may echo the key back in its error body ("Incorrect API key provided: sk-..."). Cutting that
message to a line's length first and masking after would miss a key cut in half, leaking most of its
characters; so the callers mask the raw text before cutting, and `mask_secret` also masks what is left of a
key where a cut ended the text (an ellipsis after a prefix of it).
"""

from __future__ import annotations

MASK = "***"
MIN_PARTIAL = 4
"""A cut-off prefix shorter than this is not masked (it would mask ordinary words ending a message)."""


def mask_secret(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` and a trailing cut-off prefix of it replaced by MASK."""
    if not secret or not text:
        return text
    text = text.replace(secret, MASK)
    body, ellipsis = (text[:-1], "…") if text.endswith("…") else (text, "")
    for k in range(min(len(secret) - 1, len(body)), MIN_PARTIAL - 1, -1):
        if body.endswith(secret[:k]):
            return body[:-k] + MASK + ellipsis
    return text
