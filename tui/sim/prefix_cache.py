"""The simulator's automatic prefix cache, as vLLM's: prompts are cut into blocks of `BLOCK_TOKENS` tokens,
each block named by a hash chained over every block before it, and a request's leading blocks already held
are served from the cache. The count goes out as ``usage.prompt_tokens_details.cached_tokens``, so a shared
prefix or a growing conversation shows as hits and unique prompts as none.

Simplified: a prompt's blocks are held from its arrival (not from the end of its prefill), eviction is least
recently used over a block budget, and a hit only reports cached tokens: the prefill is not shortened.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

BLOCK_TOKENS = 16
"""vLLM's default block size: only whole blocks are cached."""


def block_hashes(units: Sequence[str]) -> list[int]:
    """Each whole block's hash, chained: equal hashes mean equal prompts up to the block's end."""
    out: list[int] = []
    h = 0
    for lo in range(0, len(units) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
        h = hash((h, *units[lo : lo + BLOCK_TOKENS]))
        out.append(h)
    return out


class PrefixCache:
    """Blocks held, least recently used first, at most ``capacity_blocks`` of them."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity_blocks = max(1, capacity_blocks)
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.queries = 0
        """Prompt tokens looked up, and those served (vLLM's ``prefix_cache_queries``/``hits`` counters)."""
        self.hits = 0

    def reset(self) -> None:
        """Drop every block (vLLM's ``POST /reset_prefix_cache``): the next prompts start cold. The counters
        go on, as vLLM's do."""
        self._blocks.clear()

    def lookup_insert(self, hashes: Sequence[int], prompt_tokens: int) -> int:
        """Prompt tokens served from the cache for a prompt of these blocks (whole leading blocks held, and
        never the last prompt token, which is always computed, as in vLLM); then hold all its blocks."""
        blocks = self._blocks
        hits = 0
        for h in hashes:
            if h not in blocks:
                break
            blocks.move_to_end(h)
            hits += 1
        for h in hashes[hits:]:
            blocks[h] = None
        while len(blocks) > self.capacity_blocks:
            blocks.popitem(last=False)
        cached = max(0, min(hits * BLOCK_TOKENS, prompt_tokens - 1))
        self.queries += prompt_tokens
        self.hits += cached
        return cached
