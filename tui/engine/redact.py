"""Keeping the API key out of every message: masked before a message is cut, and after, as a safety net.

A server may echo the key back in its error body ("Incorrect API key provided: sk-..."). Cutting that
message to a line's length first and masking after would miss a key cut in half, leaking most of its
characters; so the callers mask the raw text before cutting, and `mask_secret` also masks what is left of a
key where a cut ended the text (an ellipsis after a prefix of it).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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


HIDDEN = "hidden"
"""What a query value of a URL is shown and saved as: a gateway may take its key there (``?api-key=``)."""


def display_url(url: str) -> str:
    """``url`` fit to show and save: no ``user:password@`` part and every query value replaced by
    `HIDDEN` (the names stay: ``?api-version=hidden``). A value is not worth the risk of guessing which
    names hold keys."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.username is not None or parts.password is not None:
        netloc = netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        query = urlencode([(name, HIDDEN) for name, _ in parse_qsl(query, keep_blank_values=True)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
