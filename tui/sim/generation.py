"""One generation request: its scheduling state, the bytes it writes, its faults and its truth record.

The wire format follows vLLM: chat streams start with a role-only delta (written together with the first
token, as vLLM does), then one chunk per `tokens_per_chunk` tokens (the first token always alone, like vLLM's
stream interval), then an empty delta with `finish_reason`, a usage-only chunk with empty `choices` when
`stream_options.include_usage` is true, and `data: [DONE]`. With `reasoning_tokens` N, a chat answer's first N
tokens go out as `reasoning_content` deltas (they count in `max_tokens` and `completion_tokens`, as on real
reasoning servers); completions ignore it.

`on_token` runs once per token per engine step: it is the hot path, so a chunk is a prebuilt prefix, the
orjson-dumped text and a prebuilt suffix, framed inline.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import orjson

from tui.sim.config import SimConfig
from tui.sim.event_apis import EventStream, Usage, embeddings_body
from tui.sim.http import HttpProtocol, frame, response
from tui.sim.openai_api import PLACEHOLDER, GenParams, split_template
from tui.sim.perf_model import Profile, Scheduler, Seq
from tui.sim.prometheus import ServerMetrics
from tui.sim.response_text import WordTable


class GenHost(Protocol):
    """What a generating request needs of the server that admitted it (`tui.sim.simulator.Simulator`).

    A protocol rather than an import, so the simulator may import this module and not the reverse."""

    config: SimConfig
    profile: Profile
    words: WordTable
    scheduler: Scheduler[GenRequest]
    metrics: ServerMetrics

    def finished(self, req: GenRequest, status: str, http_status: int) -> None:
        """Record the request's end (counters, truth log)."""


_DONE_FRAME = b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"
"""`data: [DONE]` as one HTTP chunk, then the last-chunk marker that ends the chunked body."""
_MALFORMED_EVENT = b'data: {"id": "malformed", "choices": [{"index": 0, "delta": {"content": "\n\n'


class GenRequest(Seq):
    """A generation request: its scheduling state (Seq) plus what it writes and what the truth log records."""

    __slots__ = (
        "admitted_ns",
        "arrival_ns",
        "cached_tokens",
        "chunk_ns",
        "chunk_tokens",
        "client_request_id",
        "content_prefix",
        "content_suffix",
        "created",
        "done",
        "events",
        "fault",
        "fault_at",
        "finish_reason",
        "first_token_ns",
        "keep_alive",
        "params",
        "proto",
        "reasoning",
        "reasoning_prefix",
        "reasoning_suffix",
        "request_id",
        "sent",
        "sim",
        "text_start",
        "traceparent",
        "transport",
    )

    def __init__(
        self,
        sim: GenHost,
        proto: HttpProtocol,
        *,
        seq_id: int,
        params: GenParams,
        target_tokens: int,
        request_id: str,
        text_start: int,
        fault: str | None,
        fault_at: int,
        client_request_id: str | None,
        arrival_ns: int,
        keep_alive: bool,
        cached_tokens: int | None = None,
        traceparent: str | None = None,
    ) -> None:
        super().__init__(seq_id, params.prompt_tokens, target_tokens)
        self.traceparent = traceparent
        """The W3C trace context the client sent, kept for the truth log (a traced server would join it)."""
        self.sim = sim
        self.proto = proto
        self.transport = proto.transport
        self.params = params
        self.request_id = request_id
        self.created = int(time.time())
        self.text_start = text_start
        self.fault = fault
        self.fault_at = fault_at
        """Mid-stream faults act once this many tokens have been sent; 0 once acted (or never)."""
        self.client_request_id = client_request_id
        self.arrival_ns = arrival_ns
        self.admitted_ns = 0
        self.first_token_ns = 0
        self.chunk_ns: list[int] = []
        self.chunk_tokens: list[int] = []
        self.keep_alive = keep_alive
        self.cached_tokens = cached_tokens
        """Prompt tokens the prefix cache served (None: no prefix cache, not reported)."""
        self.reasoning = min(sim.config.reasoning_tokens, target_tokens) if params.chat else 0
        self.finish_reason = (
            "length" if target_tokens >= params.max_tokens and params.api != "embeddings" else "stop"
        )
        self.sent = 0
        self.done = False
        self.events: EventStream | None = None
        """The answer's named events (Responses, Messages), else None (chat and completions chunks)."""
        if params.api in ("responses", "messages"):
            self.events = EventStream(
                params.api, request_id, sim.profile.model, self.created, reasoning=self.reasoning > 0
            )
            (
                self.content_prefix,
                self.content_suffix,
                self.reasoning_prefix,
                self.reasoning_suffix,
            ) = self.events.templates()
        elif params.chat:
            self.content_prefix, self.content_suffix = split_template(
                self._chunk(
                    {"index": 0, "delta": {"content": PLACEHOLDER}, "logprobs": None, "finish_reason": None}
                )
            )
            self.reasoning_prefix, self.reasoning_suffix = split_template(
                self._chunk(
                    {
                        "index": 0,
                        "delta": {"reasoning_content": PLACEHOLDER},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                )
            )
        else:
            self.content_prefix, self.content_suffix = split_template(
                self._chunk({"index": 0, "text": PLACEHOLDER, "logprobs": None, "finish_reason": None})
            )
            self.reasoning_prefix, self.reasoning_suffix = self.content_prefix, self.content_suffix

    def _chunk(self, *choices: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """A stream chunk object in OpenAI's key order."""
        return {
            "id": self.request_id,
            "object": "chat.completion.chunk" if self.params.chat else "text_completion",
            "created": self.created,
            "model": self.sim.profile.model,
            "choices": list(choices),
            **extra,
        }

    # -- called by the stepper, once per token this request gained in a step --

    def on_token(self) -> None:
        if self.done or self.fault_at < 0:
            return
        generated = self.generated
        if not self.params.stream:
            if self.first_token_ns == 0:
                self.first_token_ns = time.perf_counter_ns()
                self.sim.metrics.first_token(self.arrival_ns, self.admitted_ns, self.first_token_ns)
            if self.fault_at and generated >= self.fault_at and self.fault in ("disconnect", "stall"):
                self._act_fault()
            elif generated >= self.target_tokens:
                self._finish_plain()
            return
        finished = generated >= self.target_tokens
        pending = generated - self.sent
        if (
            finished
            or self.sent == 0
            or pending >= self.sim.config.tokens_per_chunk
            or generated == self.reasoning
        ):
            self._flush(finished)

    def _flush(self, finished: bool) -> None:
        start, count = self.sent, self.generated - self.sent
        text_start = self.text_start + start
        if start < self.reasoning:
            prefix, suffix = self.reasoning_prefix, self.reasoning_suffix
            first = start == 0
        else:
            prefix, suffix = self.content_prefix, self.content_suffix
            first = start == self.reasoning
        payload = prefix + orjson.dumps(self.sim.words.text(text_start, count, first=first)) + suffix
        data = b"%x\r\n%b\r\n" % (len(payload), payload)
        if self.events is not None:
            if start == 0:
                data = self.events.head(self._counts()) + data
            elif first:
                data = self.events.switch() + data
        elif start == 0 and self.params.chat:
            data = self.roleframe() + data
        fault_due = self.fault_at > 0 and self.generated >= self.fault_at
        if finished and not fault_due:
            data += self._tail()
        stamp = time.perf_counter_ns()
        self.transport.write(data)
        self.chunk_ns.append(stamp)
        self.chunk_tokens.append(count)
        if start == 0:
            self.first_token_ns = stamp
            self.sim.metrics.first_token(self.arrival_ns, self.admitted_ns, stamp)
        self.sent = self.generated
        if fault_due:
            self._act_fault()
            if self.fault != "malformed":
                return
            if finished:
                self.transport.write(self._tail())
        if finished:
            self._end("ok", 200)

    def _tail(self) -> bytes:
        """The finish chunk, the usage chunk if asked for, `[DONE]` and the end of the chunked body (or the
        named events that end a Responses or Messages answer)."""
        if self.events is not None:
            return self.events.tail(self.finish_reason, self._counts())
        delta: dict[str, Any] = {"delta": {}} if self.params.chat else {"text": ""}
        finish = self._chunk({"index": 0, **delta, "logprobs": None, "finish_reason": self.finish_reason})
        data = frame(orjson.dumps(finish))
        if self.params.include_usage:
            data += frame(orjson.dumps(self._chunk(usage=self._usage())))
        return data + _DONE_FRAME

    def roleframe(self) -> bytes:
        """The role-only first delta of a chat stream."""
        role = {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
        return frame(orjson.dumps(self._chunk(role)))

    def _counts(self) -> Usage:
        return Usage(self.params.prompt_tokens, self.target_tokens, self.cached_tokens, self.reasoning)

    def _usage(self) -> dict[str, Any]:
        p, c = self.params.prompt_tokens, self.target_tokens
        usage: dict[str, Any] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        if self.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning}
        return usage

    def _finish_plain(self) -> None:
        words = self.sim.words
        content = words.text(
            self.text_start + self.reasoning, self.target_tokens - self.reasoning, first=True
        )
        if self.params.api == "embeddings":
            body = embeddings_body(self.sim.profile.model, self.params.prompt_tokens, self.text_start)
        elif self.events is not None:
            thought = words.text(self.text_start, self.reasoning, first=True) if self.reasoning else ""
            body = self.events.whole(content, thought, self.finish_reason, self._counts())
        else:
            body = self._openai_body(content)
        if self.fault == "malformed":
            body = body[: len(body) // 2]
        data = response(200, body, keep_alive=self.keep_alive, headers=(("x-request-id", self.request_id),))
        stamp = time.perf_counter_ns()
        self.transport.write(data)
        self.chunk_ns.append(stamp)
        self.chunk_tokens.append(self.target_tokens)
        self.sent = self.target_tokens
        self._end("ok", 200)

    def _openai_body(self, content: str) -> bytes:
        """A whole chat or completions answer."""
        words = self.sim.words
        if self.params.chat:
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if self.reasoning:
                message["reasoning_content"] = words.text(self.text_start, self.reasoning, first=True)
            choice: dict[str, Any] = {"index": 0, "message": message}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": content}
            obj = "text_completion"
        choice.update(logprobs=None, finish_reason=self.finish_reason)
        return orjson.dumps(
            {
                "id": self.request_id,
                "object": obj,
                "created": self.created,
                "model": self.sim.profile.model,
                "choices": [choice],
                "usage": self._usage(),
            }
        )

    def _act_fault(self) -> None:
        self.fault_at = 0
        if self.fault == "malformed":
            self.transport.write(b"%x\r\n%b\r\n" % (len(_MALFORMED_EVENT), _MALFORMED_EVENT))
            return
        self.sim.scheduler.abort(self)
        if self.fault == "disconnect":
            self.proto.close()
            self._end("disconnected", 200 if self.params.stream else 0)
        else:  # stall: keep the connection open and silent; logged when the client gives up
            self.fault_at = -1

    # -- the end --

    def client_gone(self) -> None:
        """The connection closed before the response ended (client left, stall timed out, shutdown)."""
        if self.done:
            return
        self.sim.scheduler.abort(self)
        self._end("disconnected", 200 if self.params.stream else 0)

    def _end(self, status: str, http_status: int) -> None:
        self.done = True
        self.sim.finished(self, status, http_status)

    def truth(self, status: str, http_status: int) -> dict[str, Any]:
        """The truth-log record (all times `perf_counter_ns`; null when it never happened)."""
        return {
            "client_request_id": self.client_request_id,
            "id": self.request_id,
            "endpoint": self.params.api,
            "stream": self.params.stream,
            "arrival_ns": self.arrival_ns,
            "admitted_ns": self.admitted_ns or None,
            "first_token_ns": self.first_token_ns or None,
            "chunk_ns": self.chunk_ns,
            "chunk_tokens": self.chunk_tokens,
            "end_ns": time.perf_counter_ns(),
            "prompt_tokens": self.params.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "completion_tokens": 0 if self.params.api == "embeddings" else self.sent,
            "status": status,
            "http_status": http_status,
            "fault": self.fault,
            "traceparent": self.traceparent,
        }
