"""Generated text: plausible words, one token per short word with a leading space, deterministic by seed."""

from __future__ import annotations

import random

_WORDS = """
the of and to in is that for it as was with be by on not he this are or his from at which but have an they
you were her she there been one all we their has would when if so what out up said its about into than them
can only other new some could time these two may then do first any my now such like our over man me even
most made after also did many before must through back years where much your way well down should because
each just those people how too little state good very make world still own see men work long get here
between both life being under never day same another know while last might us great old year off come since
against go came right used take three small model token cache batch queue server stream request latency
memory compute kernel layer value answer reason system signal light water river stone field garden market
window paper story music color simple quiet bright early later often always again around below above across
along number point line level order plan check note start stop open close begin finish turn move carry bring
keep hold read write speak
"""
_VOCAB = tuple(_WORDS.split())

TABLE_SIZE = 8192
"""Tokens in the seeded word table; a request reads a run of it from a random start."""


class WordTable:
    """A seeded table of tokens (" word", and "." every so often); a request reads a run from a start."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        tokens: list[str] = []
        until_stop = rng.randint(6, 16)
        for _ in range(TABLE_SIZE):
            if until_stop == 0:
                tokens.append(".")
                until_stop = rng.randint(6, 16)
            else:
                tokens.append(" " + rng.choice(_VOCAB))
                until_stop -= 1
        self.tokens = tokens

    def text(self, start: int, count: int, *, first: bool = False) -> str:
        """The text of `count` tokens from `start`; `first` drops the leading space of the first token."""
        n = TABLE_SIZE
        begin = start % n
        end = begin + count
        if end <= n:
            out = "".join(self.tokens[begin:end])
        else:
            parts = self.tokens[begin:]
            remaining = count - len(parts)
            parts = parts + self.tokens * (remaining // n) + self.tokens[: remaining % n]
            out = "".join(parts)
        return out[1:] if first and out.startswith(" ") else out
