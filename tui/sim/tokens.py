"""The simulator's tokenizer rule: how many prompt tokens a request's text costs.

Deliberately not one token per word, and chat adds template tokens, so a client that assumes words are
tokens misses its input length here as it would on a real server, and must measure `usage` to hit it.
"""

from __future__ import annotations

import re

WORD_CHARS_PER_TOKEN = 4
"""A word of up to this many characters is one token; a longer one costs ceil(len / 4), as sub-word tokenizers
split long and rare words (about 4 characters per token of English text, by OpenAI's rule of thumb)."""
CHAT_TOKENS_PER_MESSAGE = 4
"""Template tokens around each chat message (role header and end-of-turn markers, as in Llama 3 and Gemma)."""
CHAT_ASSISTANT_PROMPT_TOKENS = 3
"""Template tokens that open the assistant's turn after the last message (the generation prompt)."""

_PIECES = re.compile(r"\w+|[^\w\s]")


def count_prompt_tokens(text: str) -> int:
    """Tokens in `text` by the simulator's rule: deliberately *not* one per word, so a client that assumes
    words are tokens gets the length wrong (as it would on a real server) and must measure `usage`.

    The rule: every run of word characters (letters, digits, underscore) costs 1 token when it has at most
    4 characters, else ceil(len / 4); every other non-space character (punctuation) is a token of its own.
    Chat requests add the template on top (`chat_prompt_tokens`); a request's total is at least 1.
    """
    total = 0
    for piece in _PIECES.findall(text):
        n = len(piece)
        total += 1 if n <= WORD_CHARS_PER_TOKEN else -(-n // WORD_CHARS_PER_TOKEN)
    return total


def chat_prompt_tokens(contents: list[str]) -> int:
    """Tokens of a chat request whose messages hold ``contents``: each message's text, plus
    `CHAT_TOKENS_PER_MESSAGE` per message and `CHAT_ASSISTANT_PROMPT_TOKENS` for the assistant's turn."""
    text = sum(count_prompt_tokens(c) for c in contents)
    return text + CHAT_TOKENS_PER_MESSAGE * len(contents) + CHAT_ASSISTANT_PROMPT_TOKENS


CHAT_MESSAGE_MARK = "\x00msg"
"""Stands for each of a chat message's template tokens in `prompt_units` (never a piece of text)."""
CHAT_REPLY_MARK = "\x00reply"


_UNITS = re.compile(rf"\w{{1,{WORD_CHARS_PER_TOKEN}}}|[^\w\s]")
"""A run of word characters cut every 4 characters (ceil(len / 4) pieces), and each punctuation mark."""


def text_units(text: str) -> list[str]:
    """The tokens of ``text`` by `count_prompt_tokens`'s rule, as strings (a long word cut every 4
    characters): what the prefix cache compares (`tui.sim.prefix_cache`). One regex pass, in C."""
    return _UNITS.findall(text)


def chat_units(contents: list[str]) -> list[str]:
    """A chat request's tokens in order, template included: as many as `chat_prompt_tokens` counts."""
    out: list[str] = []
    for content in contents:
        out.extend([CHAT_MESSAGE_MARK] * CHAT_TOKENS_PER_MESSAGE)
        out.extend(text_units(content))
    out.extend([CHAT_REPLY_MARK] * CHAT_ASSISTANT_PROMPT_TOKENS)
    return out
