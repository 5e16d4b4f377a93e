"""`--shared-prefix N`: every prompt starts with the same text of N tokens, to measure a server's prefix cache
on purpose. The prefix comes before the prompt's own text and adds to it (the ISL is N plus ``--isl``), as
vLLM's ``--random-prefix-len`` does; without it every prompt differs from its first tokens.

N is by the server's count, as ``--isl`` is: with ``--tokenizer`` the text is cut to N tokens locally; else
the ISL probe measured which word count costs N on this server (`WorkloadConfig.shared_prefix_sized`);
without the probe it is N words. The inner workload calibrates its own part only: it learns from the
server's count less N, so whatever the prefix really costs, the mean ISL lands on N + ``--isl``.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import TYPE_CHECKING

from tui.engine.workload.local_tokenizer import load_tokenizer
from tui.engine.workload.protocol import Message, RequestKey, RequestSpec, Workload
from tui.engine.workload.text import shared_prefix_text

if TYPE_CHECKING:
    from tui.engine.config import WorkloadConfig
    from tui.engine.records import RequestRecord

PREFIX_END = "\n\n"
"""The prefix ends in a blank line, so it reads as a preamble to the prompt's own text."""


def prefix_text(config: WorkloadConfig) -> str:
    """The shared prefix ``config`` asks for ("" for none), the same in every worker of the run."""
    n = config.shared_prefix
    if n <= 0:
        return ""
    if config.tokenizer is not None:
        tok = load_tokenizer(config.tokenizer)
        text = shared_prefix_text(config.seed, 2 * n + 8, config.prompt_salt).removesuffix(PREFIX_END)
        return tok.exact_text(text, max(1, n - tok.count(PREFIX_END))) + PREFIX_END
    words = config.shared_prefix_sized[0] if config.shared_prefix_sized is not None else n
    return shared_prefix_text(config.seed, words, config.prompt_salt)


def with_prefix(spec: RequestSpec, prefix: str, prefix_tokens: int) -> RequestSpec:
    """``spec`` with ``prefix`` in front of its prompt (or of its first message's text)."""
    if not prefix:
        return spec
    expected = None if spec.expected_input_tokens is None else spec.expected_input_tokens + prefix_tokens
    if spec.prompt is not None:
        return replace(spec, prompt=prefix + spec.prompt, expected_input_tokens=expected)
    assert spec.messages is not None
    first, *rest = spec.messages
    messages = (Message(first.role, prefix + first.content), *rest)
    return replace(spec, messages=messages, expected_input_tokens=expected)


def less_input(record: RequestRecord, tokens: int) -> RequestRecord:
    """``record`` as the inner workload should learn from it: ``tokens`` (a prefix, a history) taken off the
    server's prompt count. A copy: the record itself goes to the face unchanged."""
    if tokens <= 0 or record.input_tokens is None or record.input_source != "usage":
        return record
    inner = copy.copy(record)
    inner.input_tokens = max(0, record.input_tokens - tokens)
    return inner


class SharedPrefix:
    """Any workload's requests with the shared prefix in front."""

    def __init__(self, inner: Workload, config: WorkloadConfig) -> None:
        self.inner = inner
        self.tokens = config.shared_prefix
        self.prefix = prefix_text(config)

    @property
    def wants_replies(self) -> bool:
        """As the inner workload."""
        return self.inner.wants_replies

    def next_request(self, key: RequestKey) -> RequestSpec:
        """The inner workload's request, prefixed."""
        return with_prefix(self.inner.next_request(key), self.prefix, self.tokens)

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        """Passed on to the inner workload, the prefix's tokens taken off its prompt count."""
        self.inner.on_response(key, spec, reply_text, less_input(record, self.tokens))
