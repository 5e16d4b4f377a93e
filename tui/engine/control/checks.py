"""The checks that turn a run's levels into a notice a user must not miss: a level whose lengths are off what
was asked (`LengthCheck`), and synthetic prompts served from a warm prefix cache (`CacheCheck`).

The cache check speaks once per run, when synthetic prompts (no ``--shared-prefix``, no dataset, no
conversation) are served from the server's prefix cache beyond what the chat template explains: each such
prompt starts with words of its own, so hits mean the server had seen these very prompts
(``--repeat-prompts``, or a client that sends the same text) and the TTFTs measured are a warm cache's,
not a prefill's. A trace's prompts share the blocks it names, so those may hit as well."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tui.engine.aggregate.levels import length_mismatch
from tui.engine.config import WorkloadConfig
from tui.engine.snapshot import LevelView

BLOCK_TOKENS = 16
"""vLLM's default cache block: a cache serves whole blocks only, so the template's share rounds to them."""
UNKNOWN_TEMPLATE_TOKENS = 32
"""The template's share when the ISL probe did not measure it: a chat template's fixed text (role markers, a
default system line) fits in two blocks for the common models."""


def template_tokens(workload: WorkloadConfig) -> float:
    """Prompt tokens around the words (chat template, BOS), from the ISL probe's (words, tokens) pairs: the
    intercept of the line through the two farthest apart; `UNKNOWN_TEMPLATE_TOKENS` without two."""
    points = sorted(set(workload.isl_observations))
    if len(points) < 2 or points[0][0] == points[-1][0]:
        return UNKNOWN_TEMPLATE_TOKENS
    (w0, t0), (w1, t1) = points[0], points[-1]
    slope = (t1 - t0) / (w1 - w0)
    return max(0.0, t0 - slope * w0)


def unexpected_hits(view: LevelView, workload: WorkloadConfig, named_share: float = 0.0) -> str | None:
    """The notice for ``view`` if its prompts were served from the cache beyond the template's share and,
    for a trace, beyond ``named_share``: the share of its prompt tokens in the blocks the trace names
    (`tui.engine.traces.sharing`), which requests with the same leading ids share by design."""
    if workload.shared_prefix or workload.dataset is not None or workload.turns > 1:
        return None
    rate, isl = view.cache_hit_rate, view.mean_isl
    if not view.steady or rate is None or not (math.isfinite(rate) and math.isfinite(isl)) or rate <= 0:
        return None
    cached = rate * isl
    trace = workload.trace is not None
    allowed = (template_tokens(workload) // BLOCK_TOKENS + 1) * BLOCK_TOKENS
    if trace:
        allowed += named_share * isl
    if cached <= allowed:
        return None
    salt = f" (prompt salt {workload.prompt_salt})" if workload.prompt_salt else ""
    what = (
        f"the trace's prompts{salt}, more than its block ids share ({named_share:.0%})"
        if trace
        else f"synthetic prompts{salt}"
    )
    return (
        f"prefix cache served {rate:.0%} of the prompt tokens of {what}: the server had seen these prompts "
        "before, so TTFT is a warm cache's (each run's prompts are its own unless --repeat-prompts)"
    )


class CacheCheck:
    """Called with each snapshot's levels; says it once for the run (the first level it holds for), and
    names every level it holds for (`warm`), for the level tables' mark.
    ``named_share``: a trace's share of prompt tokens in named blocks (`unexpected_hits`)."""

    def __init__(self, named_share: float = 0.0) -> None:
        self._said = False
        self.named_share = named_share

    def notices(self, levels: Sequence[LevelView], workload: WorkloadConfig) -> list[str]:
        if self._said:
            return []
        for view in levels:
            message = unexpected_hits(view, workload, self.named_share)
            if message is not None:
                self._said = True
                return [message]
        return []

    def warm(self, levels: Sequence[LevelView], workload: WorkloadConfig) -> frozenset[int]:
        """The ids of the levels served from a warm cache (`unexpected_hits`)."""
        return frozenset(
            v.level_id for v in levels if unexpected_hits(v, workload, self.named_share) is not None
        )


# --- lengths -----------------------------------------------------------------------------------


def asked_isl(workload: WorkloadConfig) -> int | None:
    """The mean ISL a level should reach, by the server's count: ``--isl`` plus the shared prefix; None when
    there is no one target (a dataset's lengths are the file's, drawn lengths vary, a conversation's grow
    with its history)."""
    if workload.dataset is not None or workload.turns > 1 or workload.isl_dist or workload.scenarios:
        return None
    if workload.trace is not None:
        return None  # each request's own, from the trace
    return workload.isl + workload.shared_prefix


def asked_osl(workload: WorkloadConfig) -> int | None:
    """The OSL every request should reach: ``--osl`` when pinned with ``ignore_eos``; None when left to the
    model, or when the lengths are the file's or drawn."""
    if not workload.fixed_osl or workload.dataset is not None or workload.osl_dist or workload.scenarios:
        return None
    if workload.trace is not None:
        return None
    return workload.osl


class LengthCheck:
    """A notice, once per level, when a settled level's mean ISL or OSL is more than 2 tokens off what was
    asked (OSL only when it was pinned with ``ignore_eos``): a server that streams 4 tokens for ``--osl 128``
    must not pass without a word. Called with each snapshot's levels; the test itself is `length_mismatch`."""

    def __init__(self) -> None:
        self._flagged: set[int] = set()

    def notices(
        self, levels: Sequence[LevelView], workload: WorkloadConfig, *, outputs: bool = True
    ) -> list[str]:
        """The new lines for ``levels``: one for each level off what ``workload`` asked, not said before.
        ``outputs``: the API answers with output tokens (embeddings do not: no OSL to hold them to)."""
        lines = []
        osl = asked_osl(workload) if outputs else None
        for view in levels:
            if view.level_id in self._flagged:
                continue
            message = length_mismatch(view, asked_isl(workload), osl)
            if message is not None:
                self._flagged.add(view.level_id)
                lines.append(message)
        return lines
