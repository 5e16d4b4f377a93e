"""`--shared-prefix N`: every prompt starts with the same text of about N tokens, to measure a server's
prefix cache on purpose. The prefix comes before the prompt's own text (so the ISL is N plus the prompt's),
as vLLM's ``--random-prefix-len`` does; without it every prompt differs from its first tokens."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tui.engine.workload.protocol import Message, RequestKey, RequestSpec, Workload
from tui.engine.workload.text import shared_prefix_text

if TYPE_CHECKING:
    from tui.engine.records import RequestRecord


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


class SharedPrefix:
    """Any workload's requests with the shared prefix in front."""

    def __init__(self, inner: Workload, seed: int, tokens: int) -> None:
        self.inner = inner
        self.tokens = tokens
        self.prefix = shared_prefix_text(seed, tokens)

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
        """Passed on to the inner workload."""
        self.inner.on_response(key, spec, reply_text, record)
