"""Multi-turn conversations (`--turns K`): each closed-loop user carries one conversation for K turns, its
history growing with the model's own replies, then starts a new one.

The question of each turn comes from an inner workload (synthetic, shaped or a dataset), asked with the
user's request key; the history is kept per user (`RequestKey.user_key`), so it lives in the worker that
runs the user. A failed turn ends its conversation (the next request starts a new one): a history with a
missing reply is not what a real client would send. An open-loop arrival has no user: it is a one-turn
conversation. The shared prefix, when there is one, leads the first message of every conversation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tui.engine.workload.prefix import with_prefix
from tui.engine.workload.protocol import Message, RequestKey, RequestSpec, UserKey, Workload
from tui.engine.workload.text import shared_prefix_text, word_tokens

if TYPE_CHECKING:
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

    def __init__(self, inner: Workload, turns: int, *, seed: int = 0, shared_prefix: int = 0) -> None:
        if turns < 1:
            raise ValueError("a conversation has at least one turn")
        self.inner = inner
        self.turns = turns
        self.prefix = shared_prefix_text(seed, shared_prefix)
        self.prefix_tokens = shared_prefix
        self.users: dict[UserKey, _Conversation] = {}
        """Bounded by the most users the run had (one entry each, of at most ``turns`` turns)."""

    def next_request(self, key: RequestKey) -> RequestSpec:
        """The user's next turn: its history and one new question (a new conversation after ``turns``)."""
        question = self.inner.next_request(key)
        new = (
            question.messages if question.messages is not None else (Message("user", question.prompt or ""),)
        )
        conv = None if key.user_key is None else self.users.get(key.user_key)
        if conv is None or not conv.messages or conv.turns >= self.turns:
            first = replace(question, prompt=None, messages=new)
            return with_prefix(first, self.prefix, self.prefix_tokens)
        asked = sum(word_tokens(m.content) for m in new)
        return replace(
            question,
            prompt=None,
            messages=(*conv.messages, *new),
            expected_input_tokens=conv.tokens + asked,
        )

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        """Append the reply to the user's history; a failed turn ends the conversation."""
        self.inner.on_response(key, spec, reply_text, record)
        user = key.user_key
        if user is None:
            return
        if record.status != "ok" or reply_text is None or spec.messages is None:
            self.users.pop(user, None)
            return
        conv = self.users.get(user)
        if conv is None or conv.turns >= self.turns or not conv.messages:
            conv = self.users[user] = _Conversation()
        conv.messages = (*spec.messages, Message("assistant", reply_text))
        conv.turns += 1
        prompt = record.input_tokens if record.input_tokens is not None else spec.expected_input_tokens or 0
        reply = record.output_tokens if record.output_tokens is not None else word_tokens(reply_text)
        conv.tokens = prompt + reply
