"""The workload seam: what the next request asks for, as plain data, and the hook that sees its answer.

A workload decides *what* is asked (the prompt or chat messages, how many tokens, the expected input
length); `tui.engine.stream.openai.build_body` decides only *how* that goes on the wire for the target's
endpoint, and `tui.engine.stream.client` only sends it. So a new source of prompts (a dataset, a shared
prefix, a multi-turn conversation) is one new implementation of `Workload`, not an edit in three modules.

A workload runs in the engine worker process and is asked once per request, so it must be cheap per call. It
may import `tui.engine.config` and `tui.engine.records`, never the face-side `tui.engine.aggregate` or
`tui.engine.host`, nor `tui.engine.stream` (the stream depends on the workload, not the other way round).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from tui.engine.records import RequestRecord
    from tui.engine.traces.protocol import TraceRequest

Role = Literal["system", "user", "assistant"]

UserKey = tuple[int, int]
"""(worker, user index in that worker): one closed-loop user, unique in a run."""


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class RequestKey:
    """Which request is being built: enough for a deterministic workload to be a pure function of it, and
    for a conversation to find the history of the user sending it."""

    worker: int
    """The engine worker building the request."""
    seq: int
    """Per-worker sequence number (the same as `RequestRecord.seq`)."""
    user: int | None = None
    """The closed-loop user (its index in this worker) that sends it; None for an open-loop arrival, or when
    the caller does not say."""
    trace: TraceRequest | None = None
    """A trace replay's entry for this request (its lengths and blocks); None outside a replay."""

    @property
    def user_key(self) -> UserKey | None:
        """The sending user, unique in the run; None when there is none."""
        return None if self.user is None else (self.worker, self.user)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSpec:
    """What one request asks for, independent of the endpoint it is sent to.

    Exactly one of ``prompt`` and ``messages`` is set. A ``prompt`` goes to either endpoint (on chat, as one
    user message); ``messages`` need the chat endpoint (a completions server has no chat template to apply).
    """

    max_tokens: int
    """Output tokens asked for (``max_tokens``)."""
    prompt: str | None = None
    messages: tuple[Message, ...] | None = None
    fixed_osl: bool = False
    """Ask for exactly ``max_tokens`` (``ignore_eos`` and ``min_tokens``), when the server accepts them."""
    extra_fields: tuple[tuple[str, object], ...] = ()
    """Per-request JSON fields (a dataset's sampling settings, say); ``--extra-body`` still wins."""
    expected_input_tokens: int | None = None
    """What the prompt is believed to cost, recorded as the ISL (source "estimate") when the server reports
    no usage; None when the workload cannot tell."""

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("a RequestSpec has exactly one of prompt and messages")


class Workload(Protocol):
    """A source of requests, one instance per engine worker (built there by `build_workload`)."""

    @property
    def wants_replies(self) -> bool:
        """True when `on_response` needs the reply text; only then does the client keep it (it costs an append
        per chunk on the hot path)."""
        ...

    def next_request(self, key: RequestKey) -> RequestSpec:
        """What request ``key`` asks for. Called once per request, not per retry of it."""
        ...

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        """Request ``key`` (asked as ``spec``) has finished, successfully or not (see ``record.status``).

        ``reply_text``: the generated answer text (no reasoning) when `wants_replies`, else None. Called
        before the user sends its next request, so a conversation can append the reply to its history.
        """
        ...
