"""llama.cpp's `GET /slots`: its parallel slots, which ones are busy, and their context size.

llama-server's `/metrics` counts requests processing and deferred; `/slots` (on by default, off with
`--no-slots`) says how many slots there are at all, the capacity those counts fill. Read beside each scrape
of a llama.cpp server; any other server is never asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit


@dataclass(frozen=True, slots=True)
class Slots:
    """The server's slots as `/slots` listed them."""

    total: int
    busy: int
    """Slots with ``is_processing`` true."""
    n_ctx: int | None
    """Context size of a slot (the first one's), tokens."""
    tokens_in_use: int
    """Prompt plus decoded tokens of the busy slots (what their KV cache holds, about)."""


def slots_url(metrics_url: str) -> str:
    """`http://host:port/metrics` -> `http://host:port/slots`."""
    parts = urlsplit(metrics_url)
    path = parts.path
    path = path[: -len("/metrics")] if path.endswith("/metrics") else path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, path + "/slots", "", ""))


def parse_slots(data: Any) -> Slots | None:
    """`/slots`'s JSON list -> `Slots`; None for anything that is not such a list."""
    if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
        return None
    busy = [s for s in data if s.get("is_processing")]
    used = 0
    for s in busy:
        decoded = 0
        for nt in s.get("next_token") or ():
            if isinstance(nt, dict) and isinstance(nt.get("n_decoded"), int):
                decoded = max(decoded, nt["n_decoded"])
        prompt = s.get("n_prompt_tokens")
        used += (prompt if isinstance(prompt, int) else 0) + decoded
    first = data[0].get("n_ctx") if data else None
    return Slots(
        total=len(data), busy=len(busy), n_ctx=first if isinstance(first, int) else None, tokens_in_use=used
    )
