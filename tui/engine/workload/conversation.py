"""Multi-turn conversations (`--turns K`): each closed-loop user carries one conversation for K turns, its
history growing with the model's own replies, then starts a new one.

The question of each turn comes from an inner workload (synthetic, shaped or a dataset), asked with the
user's request key; the history is kept per user (`RequestKey.user_key`), so it lives in the worker that
runs the user. A failed turn ends its conversation (the next request starts a new one): a history with a
missing reply is not what a real client would send. An open-loop arrival has no user: it is a one-turn
conversation. The shared prefix, when there is one, leads the first message of every conversation.

What ``--isl`` means here, as multi-turn benchmarks do it (each turn one new user message of the asked size):
the first turn's prompt is ``--isl`` tokens (plus the shared prefix), and each later turn adds about
``--isl`` tokens to the turn before's prompt and reply, by the server's count (the new message and the
templates around it and the reply). So the first turns' workload learns from the count less the prefix,
and the later turns' (a second instance, when the source can have two) from the count less the history
(`less_input`): each calibration sizes a new message, never the whole conversation, and neither mixes the
other's template cost into its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tui.engine.workload.prefix import less_input, prefix_text, with_prefix
from tui.engine.workload.protocol import Message, RequestKey, RequestSpec, UserKey, Workload
from tui.engine.workload.text import word_tokens

if TYPE_CHECKING:
    from tui.engine.config import WorkloadConfig
    from tui.engine.records import RequestRecord


@dataclass(slots=True)
class _Conversation:
    messages: tuple[Message, ...] = ()
    """Everything said so far, replies included."""
    turns: int = 0
    """Turns answered so far."""
    tokens: int = 0
    """What the history costs: the server's count of the last prompt plus its reply, when it said."""


class Conversations:
    """Per user, the inner workload's questions asked one after the other in one growing chat."""

    wants_replies = True
    """The replies are the history."""

    def __init__(self, inner: Workload, config: WorkloadConfig, later: Workload | None = None) -> None:
        if config.turns < 1:
            raise ValueError("a conversation has at least one turn")
        self.inner = inner
        """Asks each conversation's first question."""
        self.later = later if later is not None else inner
        """Asks the questions of its later turns."""
        self.turns = config.turns
        self.prefix = prefix_text(config)
        self.prefix_tokens = config.shared_prefix if self.prefix else 0
        self.users: dict[UserKey, _Conversation] = {}
        """Bounded by the most users the run had (one entry each, of at most ``turns`` turns)."""

    def next_request(self, key: RequestKey) -> RequestSpec:
        """The user's next turn: its history and one new question (a new conversation after ``turns``)."""
        conv = None if key.user_key is None else self.users.get(key.user_key)
        first = conv is None or self._starts_anew(conv)
        question = (self.inner if first else self.later).next_request(key)
        new = (
            question.messages if question.messages is not None else (Message("user", question.prompt or ""),)
        )
        if conv is None or first:
            opening = replace(question, prompt=None, messages=new)
            return with_prefix(opening, self.prefix, self.prefix_tokens)
        asked = sum(word_tokens(m.content) for m in new)
        return replace(
            question,
            prompt=None,
            messages=(*conv.messages, *new),
            expected_input_tokens=conv.tokens + asked,
        )

    def _starts_anew(self, conv: _Conversation) -> bool:
        """True when the user's next request is a new conversation's first turn."""
        return not conv.messages or conv.turns >= self.turns

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        """Append the reply to the user's history; a failed turn ends the conversation. The inner workload
        learns from the new message's share of the prompt only (the prefix or the history taken off)."""
        user = key.user_key
        conv = None if user is None else self.users.get(user)
        first = conv is None or self._starts_anew(conv)
        before = self.prefix_tokens if conv is None or first else conv.tokens
        (self.inner if first else self.later).on_response(key, spec, reply_text, less_input(record, before))
        if user is None:
            return
        if record.status != "ok" or reply_text is None or spec.messages is None:
            self.users.pop(user, None)
            return
        if first or conv is None:
            conv = self.users[user] = _Conversation()
        conv.messages = (*spec.messages, Message("assistant", reply_text))
        conv.turns += 1
        prompt = record.input_tokens if record.input_tokens is not None else spec.expected_input_tokens or 0
        reply = record.output_tokens if record.output_tokens is not None else word_tokens(reply_text)
        conv.tokens = prompt + reply
