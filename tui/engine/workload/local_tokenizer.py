"""A local ``tokenizer.json`` (``--tokenizer PATH``), read with the optional ``tokenizers`` library.

Never downloads anything: the file is opened from disk, or the run stops with one line saying why. Used by the
synthetic workload to cut a prompt to an exact number of tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class TokenizerError(Exception):
    """The tokenizer cannot be used; the message is one line, fit to print."""


class LocalTokenizer:
    """Counts and cuts text by a tokenizer file's own rule (no special tokens: the server adds those, and the
    chat template, which the workload learns from ``usage``)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def exact_text(self, text: str, tokens: int) -> str:
        """A prefix of ``text`` (cut at a token boundary) of exactly ``tokens`` tokens when re-encoded, or as
        close as the tokenizer allows; ``text`` must be longer than that."""
        ids = self._tok.encode(text, add_special_tokens=False).ids
        n = min(tokens, len(ids))
        best = text
        for _ in range(8):  # a cut inside a merge can re-encode to one token more or less: nudge
            best = str(self._tok.decode(ids[:n])).strip()
            got = self.count(best)
            if got == tokens or n <= 0 or n >= len(ids):
                return best
            n += tokens - got
            n = max(0, min(len(ids), n))
        return best


def load_tokenizer(path: str) -> LocalTokenizer:
    """The tokenizer in ``path`` (a ``tokenizer.json``, or a folder holding one). `TokenizerError` if the
    file is missing or broken, or the optional library is not installed."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise TokenizerError(
            "--tokenizer needs the tokenizers library: pip install 'tokentop[tokenizer]'"
        ) from None
    file = Path(path)
    if file.is_dir():
        file = file / "tokenizer.json"
    if not file.is_file():
        raise TokenizerError(f"{file}: no such tokenizer file")
    try:
        return LocalTokenizer(Tokenizer.from_file(str(file)))
    except Exception as exc:  # the library raises a bare Exception for a broken file
        raise TokenizerError(f"{file}: not a tokenizer.json ({type(exc).__name__}: {exc})") from None
