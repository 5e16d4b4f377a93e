"""The simulated OpenAI-compatible server: a raw asyncio HTTP/1.1 server over the model's scheduler.

One asyncio task runs the engine loop: it asks the scheduler (`tui.sim.model.Scheduler`) for a step, sleeps
for the step's modelled duration (divided by `time_scale`), then writes the tokens that step produced to each
stream. Step ends are kept on an absolute timeline, so neither the event loop's timer granularity (about 1 ms)
nor the time spent writing accumulates into drift; when the process falls behind by more than `_MAX_LAG_S` it
restarts the timeline rather than bursting.

Endpoints: `GET /v1/models`, `POST /v1/chat/completions`, `POST /v1/completions`, plus `GET /health` and a
vLLM-style `GET /metrics` (running/waiting requests, KV usage). Streams are SSE over chunked transfer
encoding, one HTTP chunk per event; plain JSON goes out with Content-Length. Keep-alive is the HTTP/1.1
default and `Connection: close` is honoured. Requests on one connection are served in order.

The wire format follows vLLM: chat streams start with a role-only delta (written together with the first
token, as vLLM does), then one chunk per `tokens_per_chunk` tokens (the first token always alone, like vLLM's
stream interval), then an empty delta with `finish_reason`, a usage-only chunk with empty `choices` when
`stream_options.include_usage` is true, and `data: [DONE]`. With `reasoning_tokens` N, a chat answer's first N
tokens go out as `reasoning_content` deltas (they count in `max_tokens` and `completion_tokens`, as on real
reasoning servers); completions ignore it.

Prompt tokens are counted by `tui.sim.model.count_prompt_tokens` (one per word of at most 8 characters), so a
client can predict its ISL. An answer stops at `max_completion_tokens`/`max_tokens` (default: what fits in
`max_model_len`); without `ignore_eos` it stops earlier at a seeded EOS length, never before `min_tokens`.

The truth log (`truth_log`) gets one JSON line per generation request, flushed per line, stamped with
`time.perf_counter_ns()` (CLOCK_MONOTONIC, comparable across processes on Linux): see `GenRequest.truth`.
`chunk_ns` is stamped immediately before the `transport.write` of each chunk carrying generated text;
`first_token_ns` is `chunk_ns[0]` for streams and the moment the first token was produced otherwise (a
non-streamed body is logged as one chunk of all its tokens).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from tui.sim.faults import MID_STREAM_KINDS, FaultConfig, parse_fault_specs
from tui.sim.model import (
    PROFILES,
    Profile,
    Scheduler,
    Seq,
    count_prompt_tokens,
    decode_tokens_per_s,
    get_profile,
)
from tui.sim.text import TABLE_SIZE, WordTable

_MAX_HEAD_BYTES = 64 * 1024
_MAX_BODY_BYTES = 32 * 1024 * 1024
_MAX_LAG_S = 0.005
"""How far behind its timeline the engine loop may fall and still catch up (absorbs timer granularity)."""
_PLACEHOLDER = "@@tokentop-sim@@"
_PLACEHOLDER_JSON = orjson.dumps(_PLACEHOLDER)
_DONE_FRAME = b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"
"""`data: [DONE]` as one HTTP chunk, then the last-chunk marker that ends the chunked body."""
_MALFORMED_EVENT = b'data: {"id": "malformed", "choices": [{"index": 0, "delta": {"content": "\n\n'

_REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


# --- configuration ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimConfig:
    """Everything the simulator needs; built from `tokentop sim` flags by `config_from_args`."""

    profile: Profile
    host: str = "127.0.0.1"
    port: int = 8000
    time_scale: float = 1.0
    """All modelled durations are divided by this (>1 runs faster, for tests)."""
    seed: int = 0
    tokens_per_chunk: int = 1
    reasoning_tokens: int = 0
    faults: FaultConfig = field(default_factory=FaultConfig)
    truth_log: Path | None = None


def config_from_args(ns: argparse.Namespace) -> SimConfig:
    """Validate `tokentop sim` flags into a SimConfig; ValueError with a one-line reason."""
    profile = get_profile(ns.profile)
    max_seqs = getattr(ns, "max_seqs", None)
    kv_tokens = getattr(ns, "kv_tokens", None)
    prefill_chunk = getattr(ns, "prefill_chunk", None)
    if max_seqs is not None or kv_tokens is not None or prefill_chunk is not None:
        profile = profile.with_overrides(
            max_num_seqs=max_seqs, kv_cache_tokens=kv_tokens, prefill_chunk_tokens=prefill_chunk
        )
    if ns.reasoning_tokens < 0:
        raise ValueError(f"--reasoning-tokens must be 0 or more, got {ns.reasoning_tokens}")
    if not 0 <= ns.port <= 65535:
        raise ValueError(f"--port must be 0..65535, got {ns.port}")
    return SimConfig(
        profile=profile,
        host=ns.host,
        port=ns.port,
        time_scale=ns.time_scale,
        seed=ns.seed,
        tokens_per_chunk=ns.tokens_per_chunk,
        reasoning_tokens=ns.reasoning_tokens,
        faults=parse_fault_specs(ns.fault),
        truth_log=Path(ns.truth_log) if ns.truth_log else None,
    )


# --- HTTP helpers -------------------------------------------------------------------------------------------


class HttpError(Exception):
    """An error answered in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.param = param
        self.headers = headers

    def body(self) -> bytes:
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return orjson.dumps({"error": error})


def _response(
    status: int,
    body: bytes,
    *,
    keep_alive: bool,
    content_type: str = "application/json",
    headers: tuple[tuple[str, str], ...] = (),
) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}",
        f"content-type: {content_type}",
        f"content-length: {len(body)}",
        "server: tokentop-sim",
    ]
    lines += [f"{name}: {value}" for name, value in headers]
    if not keep_alive:
        lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _stream_head(request_id: str, *, keep_alive: bool) -> bytes:
    close = "connection: close\r\n" if not keep_alive else ""
    return (
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\n"
        f"transfer-encoding: chunked\r\nserver: tokentop-sim\r\nx-request-id: {request_id}\r\n{close}\r\n"
    ).encode("latin-1")


def _frame(event_json: bytes) -> bytes:
    """One SSE event (`data: ...\\n\\n`) as one HTTP chunk."""
    payload = b"data: " + event_json + b"\n\n"
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def _split_template(obj: dict[str, Any]) -> tuple[bytes, bytes]:
    """orjson-dump `obj` (which holds _PLACEHOLDER once) and split it around the placeholder."""
    before, _, after = orjson.dumps(obj).partition(_PLACEHOLDER_JSON)
    return b"data: " + before, after + b"\n\n"


# --- request parsing ----------------------------------------------------------------------------------------


def _content_text(content: object, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif not isinstance(part, dict):
                raise HttpError(400, f"{where} content parts must be objects", param="messages")
        return " ".join(parts)
    raise HttpError(400, f"{where} content must be a string, a list of parts or null", param="messages")


def _int_field(obj: dict[str, Any], name: str, *, minimum: int) -> int | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise HttpError(400, f"{name} must be an integer", param=name)
    if value < minimum:
        raise HttpError(400, f"{name} must be at least {minimum}, got {value}", param=name)
    return value


def _bool_field(obj: dict[str, Any], name: str) -> bool:
    value = obj.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise HttpError(400, f"{name} must be a boolean", param=name)
    return value


@dataclass
class GenParams:
    """A validated generation request."""

    chat: bool
    prompt_tokens: int
    max_tokens: int
    """The cap on completion tokens (asked for, or what fits in max_model_len)."""
    stream: bool
    include_usage: bool
    ignore_eos: bool
    min_tokens: int
    seed: int | None


def parse_generation(chat: bool, body: bytes, profile: Profile) -> GenParams:
    """Validate a chat or completions body; HttpError (400/404) with OpenAI's message style otherwise."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise HttpError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise HttpError(400, "request body must be a JSON object")
    model = obj.get("model")
    if model is not None and model != profile.model:
        raise HttpError(404, f"The model `{model}` does not exist.", code="model_not_found", param="model")
    if chat:
        messages = obj.get("messages")
        if not isinstance(messages, list) or not messages:
            raise HttpError(400, "messages is required and must be a non-empty list", param="messages")
        text_tokens = 0
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise HttpError(400, f"messages[{i}] must be an object with a role", param="messages")
            text_tokens += count_prompt_tokens(_content_text(message.get("content"), f"messages[{i}]"))
    else:
        prompt = obj.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, str):
            text_tokens = count_prompt_tokens(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            text_tokens = len(prompt)  # token ids
        else:
            raise HttpError(400, "prompt is required: a string, or one list of token ids", param="prompt")
    prompt_tokens = max(1, text_tokens)
    if obj.get("n", 1) not in (1, None):
        raise HttpError(400, "only n=1 is supported", param="n")
    max_tokens = _int_field(obj, "max_completion_tokens", minimum=1)
    if max_tokens is None:
        max_tokens = _int_field(obj, "max_tokens", minimum=1)
    limit = profile.max_model_len - prompt_tokens
    if max_tokens is None:
        max_tokens = limit
    if limit < 1 or max_tokens > limit:
        raise HttpError(
            400,
            f"This model's maximum context length is {profile.max_model_len} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the prompt, {max_tokens} in the "
            "completion). Please reduce the length of the prompt or completion.",
            code="context_length_exceeded",
            param="max_tokens",
        )
    stream = _bool_field(obj, "stream")
    options = obj.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, dict):
            raise HttpError(400, "stream_options must be an object", param="stream_options")
        if not stream:
            raise HttpError(400, "stream_options is only allowed when stream is true", param="stream_options")
        include_usage = _bool_field(options, "include_usage")
    min_tokens = _int_field(obj, "min_tokens", minimum=0) or 0
    if min_tokens > max_tokens:
        raise HttpError(
            400, f"min_tokens ({min_tokens}) exceeds max_tokens ({max_tokens})", param="min_tokens"
        )
    seed = obj.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise HttpError(400, "seed must be an integer", param="seed")
    return GenParams(
        chat=chat,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=include_usage,
        ignore_eos=_bool_field(obj, "ignore_eos"),
        min_tokens=min_tokens,
        seed=seed,
    )


# --- the truth log ------------------------------------------------------------------------------------------


class TruthLog:
    """Appends one JSON line per request and flushes it, so a reader sees each request as it ends."""

    def __init__(self, path: Path) -> None:
        self._file: IO[bytes] = path.open("ab")

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(orjson.dumps(record) + b"\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


# --- one generation request ---------------------------------------------------------------------------------


class GenRequest(Seq):
    """A generation request: its scheduling state (Seq) plus what it writes and what the truth log records."""

    __slots__ = (
        "admitted_ns",
        "arrival_ns",
        "chunk_ns",
        "chunk_tokens",
        "client_request_id",
        "content_prefix",
        "content_suffix",
        "created",
        "done",
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
        "transport",
    )

    def __init__(
        self,
        sim: Simulator,
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
    ) -> None:
        super().__init__(seq_id, params.prompt_tokens, target_tokens)
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
        self.reasoning = min(sim.config.reasoning_tokens, target_tokens) if params.chat else 0
        self.finish_reason = "length" if target_tokens >= params.max_tokens else "stop"
        self.sent = 0
        self.done = False
        if params.chat:
            self.content_prefix, self.content_suffix = _split_template(
                self._chunk(
                    {"index": 0, "delta": {"content": _PLACEHOLDER}, "logprobs": None, "finish_reason": None}
                )
            )
            self.reasoning_prefix, self.reasoning_suffix = _split_template(
                self._chunk(
                    {
                        "index": 0,
                        "delta": {"reasoning_content": _PLACEHOLDER},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                )
            )
        else:
            self.content_prefix, self.content_suffix = _split_template(
                self._chunk({"index": 0, "text": _PLACEHOLDER, "logprobs": None, "finish_reason": None})
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

    # -- called by the engine loop, once per token this request gained in a step --

    def on_token(self) -> None:
        if self.done or self.fault_at < 0:
            return
        generated = self.generated
        if not self.params.stream:
            if self.first_token_ns == 0:
                self.first_token_ns = time.perf_counter_ns()
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
        if start == 0 and self.params.chat:
            data = self.role_frame() + data
        fault_due = self.fault_at > 0 and self.generated >= self.fault_at
        if finished and not fault_due:
            data += self._tail()
        stamp = time.perf_counter_ns()
        self.transport.write(data)
        self.chunk_ns.append(stamp)
        self.chunk_tokens.append(count)
        if start == 0:
            self.first_token_ns = stamp
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
        """The finish chunk, the usage chunk if asked for, `[DONE]` and the end of the chunked body."""
        delta: dict[str, Any] = {"delta": {}} if self.params.chat else {"text": ""}
        finish = self._chunk({"index": 0, **delta, "logprobs": None, "finish_reason": self.finish_reason})
        data = _frame(orjson.dumps(finish))
        if self.params.include_usage:
            data += _frame(orjson.dumps(self._chunk(usage=self._usage())))
        return data + _DONE_FRAME

    def role_frame(self) -> bytes:
        """The role-only first delta of a chat stream."""
        role = {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
        return _frame(orjson.dumps(self._chunk(role)))

    def _usage(self) -> dict[str, Any]:
        p, c = self.params.prompt_tokens, self.target_tokens
        usage: dict[str, Any] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        if self.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning}
        return usage

    def _finish_plain(self) -> None:
        words = self.sim.words
        content = words.text(
            self.text_start + self.reasoning, self.target_tokens - self.reasoning, first=True
        )
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
        body = orjson.dumps(
            {
                "id": self.request_id,
                "object": obj,
                "created": self.created,
                "model": self.sim.profile.model,
                "choices": [choice],
                "usage": self._usage(),
            }
        )
        if self.fault == "malformed":
            body = body[: len(body) // 2]
        data = _response(200, body, keep_alive=self.keep_alive, headers=(("x-request-id", self.request_id),))
        stamp = time.perf_counter_ns()
        self.transport.write(data)
        self.chunk_ns.append(stamp)
        self.chunk_tokens.append(self.target_tokens)
        self.sent = self.target_tokens
        self._end("ok", 200)

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
            "endpoint": "chat" if self.params.chat else "completions",
            "stream": self.params.stream,
            "arrival_ns": self.arrival_ns,
            "admitted_ns": self.admitted_ns or None,
            "first_token_ns": self.first_token_ns or None,
            "chunk_ns": self.chunk_ns,
            "chunk_tokens": self.chunk_tokens,
            "end_ns": time.perf_counter_ns(),
            "prompt_tokens": self.params.prompt_tokens,
            "completion_tokens": self.sent,
            "status": status,
            "http_status": http_status,
            "fault": self.fault,
        }


# --- the simulator ------------------------------------------------------------------------------------------


class Simulator:
    """Request handling, the engine loop and the counters; one per server."""

    def __init__(self, config: SimConfig, truth_log: TruthLog | None = None) -> None:
        self.config = config
        self.profile = config.profile
        self.scheduler: Scheduler[GenRequest] = Scheduler(config.profile)
        self.words = WordTable(config.seed)
        self.truth_log = truth_log
        self.connections: set[HttpProtocol] = set()
        self._fault_rng = random.Random(f"{config.seed}:faults")
        self._request_rng = random.Random(f"{config.seed}:requests")
        self._next_seq = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.counters = {
            "prompt_tokens": 0,
            "generation_tokens": 0,
            "requests_ok": 0,
            "requests_error": 0,
            "requests_disconnected": 0,
        }
        models = {
            "object": "list",
            "data": [
                {
                    "id": config.profile.model,
                    "object": "model",
                    "created": 0,
                    "owned_by": "tokentop-sim",
                    "max_model_len": config.profile.max_model_len,
                }
            ],
        }
        self._models_body = orjson.dumps(models)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._engine_loop(), name="tokentop-sim-engine")

    async def close(self) -> None:
        """Stop the engine, drop every connection (in-flight requests are logged as disconnected)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for proto in list(self.connections):
            proto.abort()
        for _ in range(2):
            await asyncio.sleep(0)  # transports call connection_lost soon, which logs what was in flight
        for proto in list(self.connections):
            proto.connection_lost(None)
        if self.truth_log is not None:
            self.truth_log.close()
            self.truth_log = None

    # -- the engine loop --

    async def _engine_loop(self) -> None:
        loop = asyncio.get_running_loop()
        scale = self.config.time_scale
        prev_end = loop.time()
        while True:
            step = self.scheduler.step()
            if step is None:
                self._wake.clear()
                await self._wake.wait()
                prev_end = loop.time()
                continue
            if step.admitted:
                now_ns = time.perf_counter_ns()
                for req in step.admitted:
                    if not req.admitted_ns:
                        req.admitted_ns = now_ns
            # The next step runs (on the modelled GPU) while this process writes the last step's tokens, so
            # its end is reckoned from the last end, not from now. Only when writing fell more than
            # _MAX_LAG_S behind that timeline is it restarted from now: the process is the bottleneck then,
            # and catching up would burst.
            end = prev_end + step.duration_s / scale
            now = loop.time()
            if now - end > _MAX_LAG_S:
                end = now
            delay = end - now
            # Always yield, so arrivals and disconnects are seen even when the process is behind.
            await asyncio.sleep(delay if delay > 0 else 0)
            prev_end = end
            self.counters["generation_tokens"] += len(step.emitted)
            for req in step.emitted:
                req.on_token()

    # -- HTTP dispatch --

    def handle(
        self,
        proto: HttpProtocol,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
        keep_alive: bool,
    ) -> None:
        """Answer one parsed request; ends by calling `proto.response_done` (now or when the stream ends)."""
        path = target.partition("?")[0]
        try:
            if path in ("/v1/chat/completions", "/v1/completions"):
                if method != "POST":
                    raise HttpError(
                        405,
                        f"Method {method} not allowed on {path}",
                        code="method_not_allowed",
                        headers=(("allow", "POST"),),
                    )
                self._generate(proto, path == "/v1/chat/completions", headers, body, keep_alive)
                return
            if path in ("/v1/models", "/health", "/metrics"):
                if method != "GET":
                    raise HttpError(
                        405,
                        f"Method {method} not allowed on {path}",
                        code="method_not_allowed",
                        headers=(("allow", "GET"),),
                    )
                if path == "/v1/models":
                    proto.send(_response(200, self._models_body, keep_alive=keep_alive), keep_alive)
                elif path == "/health":
                    proto.send(_response(200, b"", keep_alive=keep_alive), keep_alive)
                else:
                    proto.send(
                        _response(
                            200,
                            self._metrics(),
                            keep_alive=keep_alive,
                            content_type="text/plain; version=0.0.4",
                        ),
                        keep_alive,
                    )
                return
            raise HttpError(404, f"Invalid URL ({method} {path})", code="not_found")
        except HttpError as err:
            proto.send(
                _response(err.status, err.body(), keep_alive=keep_alive, headers=err.headers), keep_alive
            )

    def _generate(
        self, proto: HttpProtocol, chat: bool, headers: dict[str, str], body: bytes, keep_alive: bool
    ) -> None:
        arrival_ns = proto.request_ns
        client_request_id = headers.get("x-tokentop-request-id")
        self._next_seq += 1
        seq_id = self._next_seq
        request_id = f"{'chatcmpl' if chat else 'cmpl'}-{self._request_rng.getrandbits(64):016x}{seq_id:x}"
        try:
            params = parse_generation(chat, body, self.profile)
        except HttpError as err:
            self._log_rejected(request_id, client_request_id, arrival_ns, err.status, None, 0, chat)
            raise
        faults = self.config.faults
        fault = faults.draw(self._fault_rng)
        rng = random.Random(params.seed) if params.seed is not None else self._request_rng
        text_start = rng.randrange(TABLE_SIZE)
        target = params.max_tokens
        if not params.ignore_eos:
            eos = (
                1
                + int(rng.expovariate(1.0 / self.profile.eos_mean_tokens))
                + self.config.reasoning_tokens * chat
            )
            target = min(target, max(params.min_tokens, eos))
        fault_at = self._fault_rng.randint(1, max(1, target - 1)) if fault in MID_STREAM_KINDS else 0
        if fault == "error500":
            self._reject(
                request_id,
                client_request_id,
                arrival_ns,
                params,
                fault,
                HttpError(
                    500, "simulated internal server error", type_="server_error", code="internal_error"
                ),
            )
        if fault == "error429":
            self._reject(
                request_id,
                client_request_id,
                arrival_ns,
                params,
                fault,
                HttpError(
                    429,
                    "simulated rate limit: retry after 1 s",
                    type_="rate_limit_error",
                    code="rate_limit_exceeded",
                    headers=(("retry-after", "1"),),
                ),
            )
        if faults.queue503 is not None and self.scheduler.would_wait(params.prompt_tokens) > faults.queue503:
            self._reject(
                request_id,
                client_request_id,
                arrival_ns,
                params,
                "queue503",
                HttpError(
                    503,
                    f"simulated overload: more than {faults.queue503} requests waiting",
                    type_="server_error",
                    code="overloaded",
                    headers=(("retry-after", "1"),),
                ),
            )
        req = GenRequest(
            self,
            proto,
            seq_id=seq_id,
            params=params,
            target_tokens=target,
            request_id=request_id,
            text_start=text_start,
            fault=fault,
            fault_at=fault_at,
            client_request_id=client_request_id,
            arrival_ns=arrival_ns,
            keep_alive=keep_alive,
        )
        self.counters["prompt_tokens"] += params.prompt_tokens
        proto.current = req
        if params.stream:
            proto.transport.write(_stream_head(request_id, keep_alive=keep_alive))
        self.scheduler.add(req)
        self._wake.set()

    def _reject(
        self,
        request_id: str,
        client_request_id: str | None,
        arrival_ns: int,
        params: GenParams,
        fault: str,
        err: HttpError,
    ) -> None:
        self._log_rejected(
            request_id, client_request_id, arrival_ns, err.status, fault, params.prompt_tokens, params.chat
        )
        raise err

    def _log_rejected(
        self,
        request_id: str,
        client_request_id: str | None,
        arrival_ns: int,
        http_status: int,
        fault: str | None,
        prompt_tokens: int,
        chat: bool,
    ) -> None:
        self.counters["requests_error"] += 1
        if self.truth_log is None:
            return
        self.truth_log.write(
            {
                "client_request_id": client_request_id,
                "id": request_id,
                "endpoint": "chat" if chat else "completions",
                "stream": None,
                "arrival_ns": arrival_ns,
                "admitted_ns": None,
                "first_token_ns": None,
                "chunk_ns": [],
                "chunk_tokens": [],
                "end_ns": time.perf_counter_ns(),
                "prompt_tokens": prompt_tokens,
                "completion_tokens": 0,
                "status": "error",
                "http_status": http_status,
                "fault": fault,
            }
        )

    def finished(self, req: GenRequest, status: str, http_status: int) -> None:
        """A generation request ended: log it and let its connection serve the next request."""
        self.counters[f"requests_{status}"] += 1
        if self.truth_log is not None:
            self.truth_log.write(req.truth(status, http_status))
        if status == "ok" and req.proto.current is req:
            req.proto.response_done(req.keep_alive)

    def _metrics(self) -> bytes:
        name = f'{{model_name="{self.profile.model}"}}'
        sched = self.scheduler
        rows = [
            ("gauge", "vllm:num_requests_running", len(sched.running)),
            ("gauge", "vllm:num_requests_waiting", sched.num_waiting),
            ("gauge", "vllm:kv_cache_usage_perc", round(sched.kv_usage, 6)),
            ("counter", "vllm:num_preemptions_total", sched.preemptions),
            ("counter", "vllm:prompt_tokens_total", self.counters["prompt_tokens"]),
            ("counter", "vllm:generation_tokens_total", self.counters["generation_tokens"]),
        ]
        lines = [f"# TYPE {metric} {kind}\n{metric}{name} {value}\n" for kind, metric, value in rows]
        return "".join(lines).encode()


# --- the HTTP/1.1 connection --------------------------------------------------------------------------------


class HttpProtocol(asyncio.Protocol):
    """One client connection: parses requests (request line, headers, Content-Length body) one at a time."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set in connection_made
        self.buffer = bytearray()
        self.busy = False
        self.closed = False
        self.current: GenRequest | None = None
        self.request_ns = 0
        """When the first bytes of the request being parsed were read: its arrival for the truth log."""
        self._continue_sent = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.sim.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.sim.connections.discard(self)
        current, self.current = self.current, None
        if current is not None:
            current.client_gone()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.buffer:
            self.request_ns = time.perf_counter_ns()
        self.buffer += data
        if len(self.buffer) > _MAX_HEAD_BYTES + _MAX_BODY_BYTES:  # a client pipelining without reading
            self.abort()
            return
        if not self.busy:
            self._process()

    def close(self) -> None:
        """Close after what was written is flushed."""
        self.current = None
        self.closed = True
        self.transport.close()

    def abort(self) -> None:
        self.transport.abort()

    def send(self, data: bytes, keep_alive: bool) -> None:
        """Write a whole response and finish it."""
        if not self.closed:
            self.transport.write(data)
        self.response_done(keep_alive)

    def response_done(self, keep_alive: bool) -> None:
        self.busy = False
        self.current = None
        if not keep_alive:
            self.close()
        elif self.buffer:
            asyncio.get_running_loop().call_soon(self._process)

    def _error(self, status: int, message: str) -> None:
        self.busy = True
        self.buffer.clear()
        self.send(_response(status, HttpError(status, message).body(), keep_alive=False), False)

    def _process(self) -> None:
        """Parse one complete request from the buffer, if there is one, and hand it to the simulator."""
        if self.busy or self.closed:
            return
        buf = self.buffer
        while buf[:2] == b"\r\n":  # tolerate stray CRLF between requests (RFC 9112 2.2)
            del buf[:2]
        head_end = buf.find(b"\r\n\r\n")
        if head_end < 0:
            if len(buf) > _MAX_HEAD_BYTES:
                self._error(431, "request head too large")
            return
        lines = bytes(buf[:head_end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._error(400, "malformed request line")
            return
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                self._error(400, "malformed header line")
                return
            headers[name.strip().lower()] = value.strip()
        if "transfer-encoding" in headers:
            self._error(501, "chunked request bodies are not supported; send Content-Length")
            return
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            length = -1
        if length < 0:
            self._error(400, "bad Content-Length")
            return
        if length > _MAX_BODY_BYTES:
            self._error(413, "request body too large")
            return
        body_end = head_end + 4 + length
        if len(buf) < body_end:
            if headers.get("expect", "").lower() == "100-continue" and not self._continue_sent:
                self._continue_sent = True
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return
        body = bytes(buf[head_end + 4 : body_end])
        del buf[:body_end]
        self._continue_sent = False
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        self.busy = True
        self.sim.handle(self, method, target, headers, body, keep_alive)


# --- running it ---------------------------------------------------------------------------------------------


class ListenError(Exception):
    """The server could not bind its address."""


async def serve(
    config: SimConfig,
    stop: asyncio.Event,
    *,
    on_ready: Callable[[str], None] | None = None,
    truth_log: TruthLog | None = None,
) -> None:
    """Serve until `stop` is set. `on_ready` gets the base URL (`http://host:port/v1`) once listening."""
    loop = asyncio.get_running_loop()
    sim = Simulator(config, truth_log)
    try:
        server = await loop.create_server(lambda: HttpProtocol(sim), config.host, config.port, backlog=4096)
    except OSError as exc:
        if truth_log is not None:
            truth_log.close()
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise ListenError(f"cannot listen on {config.host}:{config.port}: {reason}") from None
    port = server.sockets[0].getsockname()[1]
    host = f"[{config.host}]" if ":" in config.host else config.host
    sim.start()
    if on_ready is not None:
        on_ready(f"http://{host}:{port}/v1")
    try:
        await stop.wait()
    finally:
        server.close()
        await sim.close()


def _run(coro: Coroutine[Any, Any, int]) -> int:
    """Run on uvloop when it is installed (optional), else asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(coro)
    uvloop.install()  # pragma: no cover - Python 3.10 only
    return asyncio.run(coro)  # pragma: no cover


def run(config: SimConfig) -> int:
    """Serve `config` until SIGINT/SIGTERM (exit 0); exit 1 if the address is taken or the log can't open."""
    truth_log: TruthLog | None = None
    if config.truth_log is not None:
        try:
            truth_log = TruthLog(config.truth_log)
        except OSError as exc:
            print(
                f"tokentop sim: cannot open truth log {config.truth_log}: {exc.strerror or exc}",
                file=sys.stderr,
            )
            return 1

    def ready(url: str) -> None:
        print(f"tokentop sim: serving profile {config.profile.name} on {url}", flush=True)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await serve(config, stop, on_ready=ready, truth_log=truth_log)
        except ListenError as exc:
            print(f"tokentop sim: {exc}", file=sys.stderr)
            return 1
        return 0

    return _run(main())


def list_profiles() -> str:
    """The `--list-profiles` text: one line per profile."""
    width = max(len(name) for name in PROFILES)
    lines = []
    for p in PROFILES.values():
        one = decode_tokens_per_s(p, 1)
        full = decode_tokens_per_s(p, min(p.max_num_seqs, 256))
        lines.append(
            f"{p.name:<{width}}  {p.description}  [model {p.model}; max {p.max_num_seqs} seqs, "
            f"{p.kv_cache_tokens:,} KV tokens; model says {one:,.0f} tok/s at 1 stream, "
            f"{full:,.0f} at {min(p.max_num_seqs, 256)}]"
        )
    return "\n".join(lines)


def run_from_args(ns: argparse.Namespace) -> int:
    """`tokentop sim`: exit 0 on a clean stop, 1 if it cannot listen, 2 on a bad flag (one line on stderr)."""
    if ns.list_profiles:
        print(list_profiles())
        return 0
    try:
        config = config_from_args(ns)
    except ValueError as exc:
        print(f"tokentop: error: {exc}", file=sys.stderr)
        return 2
    return run(config)
