"""Synthetic prompt text of a given word count, cheap per request whatever the count.

The synthetic rule (one short common word per token, the simulator's count and about a real tokenizer's)
comes from `tui.engine.workload.synthetic`; this module only makes it cheap when the length changes per
request: one long fixed text per seed is made once, and a prompt is a few unique leading words plus a
slice of it (a slice costs a copy, where drawing the words again would cost ~0.1 ms per 500).
"""

from __future__ import annotations

import random
import secrets
from array import array

from tui.engine.workload.synthetic import _VOCAB as VOCAB

UNIQUE_HEAD_WORDS = 4
"""Leading words drawn per request, so prompts differ from their first tokens and a prefix cache cannot
serve a whole prompt (the synthetic workload does the same)."""


class WordText:
    """One fixed text of ``words`` words of ``vocab`` for ``seed``, sliced by word count."""

    def __init__(self, seed: str, words: int, vocab: tuple[str, ...] = VOCAB) -> None:
        rng = random.Random(seed)
        drawn = rng.choices(vocab, k=max(0, words))
        self.text = "".join(" " + w for w in drawn)
        """The whole text; every word is preceded by a space."""
        self._ends = array("q", [0])
        for w in drawn:
            self._ends.append(self._ends[-1] + 1 + len(w))

    @property
    def words(self) -> int:
        """How many words the text holds."""
        return len(self._ends) - 1

    def first(self, n: int) -> str:
        """The first ``n`` words (each with its leading space); all of them when ``n`` is larger."""
        return self.text[: self._ends[min(max(0, n), self.words)]]


PREFIX_VOCAB: tuple[str, ...] = tuple(w for w in VOCAB if len(w) <= 4)
"""Words of one token each by the simulator's rule and most tokenizers, so one word more or less moves a
text's cost by one token: the shared prefix's (the probe sizes it to exactly N, `tui.engine.host.isl_probe`)
and the shaped prompts' (a drawn ISL is then a word count on a line, whatever its length)."""


def new_salt() -> str:
    """A prompt salt for a new run: 8 hex digits, 4 billion apart from any other run's."""
    return secrets.token_hex(4)


def salted(salt: str, key: str) -> str:
    """The seed of a run's own words: ``key`` under the run's prompt salt; ``key`` itself with no salt."""
    return f"{salt}:{key}" if salt else key


def unique_head(rng: random.Random, n: int, vocab: tuple[str, ...] = VOCAB) -> str:
    """``n`` words of ``vocab`` drawn from ``rng`` (space-separated, no leading space)."""
    return " ".join(rng.choices(vocab, k=n))


def shared_prefix_text(seed: int, words: int, salt: str = "") -> str:
    """The text every prompt starts with under ``--shared-prefix``: fixed per seed and prompt salt (a longer
    one extends a shorter one), drawn apart from the prompts' own text, ending in a blank line so it reads as
    a preamble."""
    if words <= 0:
        return ""
    rng = random.Random(salted(salt, f"{seed}:shared-prefix"))
    return " ".join(rng.choices(PREFIX_VOCAB, k=words)) + "\n\n"


def word_tokens(text: str) -> int:
    """What ``text`` costs by the synthetic rule (one token per whitespace-separated word): the estimate a
    record carries when the server reports no usage."""
    return len(text.split())
