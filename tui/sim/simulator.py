"""The simulator: routes requests, admits generations (EOS length, faults, rejections) and keeps the counters.

Endpoints: `GET /v1/models`, `POST /v1/chat/completions`, `/v1/completions`, `/v1/responses` (OpenAI
Responses), `/v1/messages` (Anthropic Messages), `/v1/embeddings`, plus `GET /health`, a vLLM-style
`GET /metrics` (`tui.sim.prometheus`; 404 with `metrics=False`) and vLLM's `POST /reset_prefix_cache`
(empties the prefix cache; 404 with `cache_reset=False`). Without `ignore_eos` an answer stops at a seeded
EOS length, never before `min_tokens`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import NamedTuple

import orjson

from tui.sim.config import SimConfig
from tui.sim.dcgm import GpuModel
from tui.sim.faults import MID_STREAM_KINDS
from tui.sim.generation import GenRequest
from tui.sim.http import HttpProtocol, response, stream_head
from tui.sim.openai_api import API_PATHS, GenParams, HttpError, parse_generation
from tui.sim.perf_model import Scheduler
from tui.sim.prefix_cache import BLOCK_TOKENS, PrefixCache
from tui.sim.prometheus import ServerMetrics
from tui.sim.response_text import TABLE_SIZE, WordTable
from tui.sim.stepper import run_steps
from tui.sim.truth import StateLog, TruthLog, rejected_record


class _Rejection(NamedTuple):
    """How a fault that rejects a request at once is answered."""

    status: int
    message: str
    type_: str
    code: str
    headers: tuple[tuple[str, str], ...] = ()

    def error(self) -> HttpError:
        """A fresh exception each time (re-raising one instance would grow its traceback)."""
        return HttpError(self.status, self.message, type_=self.type_, code=self.code, headers=self.headers)


_REJECTIONS = {
    "error500": _Rejection(500, "simulated internal server error", "server_error", "internal_error"),
    "error429": _Rejection(
        429,
        "simulated rate limit: retry after 1 s",
        "rate_limit_error",
        "rate_limit_exceeded",
        (("retry-after", "1"),),
    ),
}
"""The rate faults answered with an HTTP error before any generation (see tui.sim.faults)."""


_ID_PREFIX = {
    "chat": "chatcmpl",
    "completions": "cmpl",
    "responses": "resp",
    "messages": "msg",
    "embeddings": "embd",
}
"""Each API's answer id prefix."""


class Simulator:
    """Request handling, the engine task and the counters; one per server."""

    def __init__(
        self, config: SimConfig, truth_log: TruthLog | None = None, state_log: StateLog | None = None
    ) -> None:
        self.config = config
        self.profile = config.profile
        self.scheduler: Scheduler[GenRequest] = Scheduler(config.profile)
        self.words = WordTable(config.seed)
        self.truth_log = truth_log
        self.state_log = state_log
        self.metrics = ServerMetrics()
        if self.profile.gpus > 0:
            self.metrics.gpu = GpuModel(self.profile, self.config.time_scale, time.perf_counter_ns())
        self.prefix_cache = (
            PrefixCache(config.profile.kv_cache_tokens // BLOCK_TOKENS) if config.prefix_cache else None
        )
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
        on_state = self.note_state if self.state_log is not None else None
        self._task = asyncio.get_running_loop().create_task(
            run_steps(
                self.scheduler,
                self._wake,
                self.config.time_scale,
                self.counters,
                self.metrics,
                on_state,
            ),
            name="tokentop-sim-engine",
        )

    def note_state(self) -> None:
        """Record the scheduler's state in the state log (a no-op line when it did not change)."""
        if self.state_log is not None:
            sched = self.scheduler
            self.state_log.note(time.perf_counter_ns(), len(sched.running), sched.num_waiting, sched.kv_used)

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
        if self.state_log is not None:
            self.note_state()
            self.state_log.close()
            self.state_log = None

    # -- the stepper --

    def error_body(self, status: int, message: str) -> bytes:
        """An error the connection answers itself, in OpenAI's shape like every other."""
        return HttpError(status, message).body()

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
            api = API_PATHS.get(path)
            if api is not None:
                if method != "POST":
                    raise HttpError(
                        405,
                        f"Method {method} not allowed on {path}",
                        code="method_not_allowed",
                        headers=(("allow", "POST"),),
                    )
                try:
                    self._generate(proto, api, headers, body, keep_alive)
                except HttpError as err:
                    err.anthropic = api == "messages"
                    raise
                return
            if path == "/reset_prefix_cache" and self.config.cache_reset:
                self._reset_prefix_cache(proto, method, keep_alive)
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
                    proto.send(response(200, self._models_body, keep_alive=keep_alive), keep_alive)
                elif path == "/health":
                    proto.send(response(200, b"", keep_alive=keep_alive), keep_alive)
                elif not self.config.metrics:
                    raise HttpError(404, f"Invalid URL ({method} {path})", code="not_found")
                else:
                    proto.send(
                        response(
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
                response(err.status, err.body(), keep_alive=keep_alive, headers=err.headers), keep_alive
            )

    def _reset_prefix_cache(self, proto: HttpProtocol, method: str, keep_alive: bool) -> None:
        """vLLM's dev-mode endpoint: drop every cached block, answer ``{"success": true}``."""
        if method != "POST":
            raise HttpError(
                405,
                f"Method {method} not allowed on /reset_prefix_cache",
                code="method_not_allowed",
                headers=(("allow", "POST"),),
            )
        if self.prefix_cache is not None:
            self.prefix_cache.reset()
        proto.send(response(200, b'{"success":true}', keep_alive=keep_alive), keep_alive)

    def _generate(
        self, proto: HttpProtocol, api: str, headers: dict[str, str], body: bytes, keep_alive: bool
    ) -> None:
        arrival_ns = proto.request_ns
        client_request_id = headers.get("x-tokentop-request-id")
        self._next_seq += 1
        seq_id = self._next_seq
        request_id = f"{_ID_PREFIX[api]}-{self._request_rng.getrandbits(64):016x}{seq_id:x}"
        try:
            if api == "messages" and "anthropic-version" not in headers:
                raise HttpError(400, "anthropic-version: header is required")
            params = parse_generation(api, body, self.profile, blocks=self.prefix_cache is not None)
        except HttpError as err:
            self._log_rejected(request_id, client_request_id, arrival_ns, err.status, None, 0, api)
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
                + self.config.reasoning_tokens * params.chat
            )
            target = min(target, max(params.min_tokens, eos))
        fault_at = self._fault_rng.randint(1, max(1, target - 1)) if fault in MID_STREAM_KINDS else 0
        if fault in _REJECTIONS:
            rejection = _REJECTIONS[fault]
            self._reject(request_id, client_request_id, arrival_ns, params, fault, rejection.error())
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
        cached = (
            None
            if self.prefix_cache is None
            else self.prefix_cache.lookup_insert(params.prompt_blocks, params.prompt_tokens)
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
            cached_tokens=cached,
            traceparent=headers.get("traceparent"),
        )
        self.counters["prompt_tokens"] += params.prompt_tokens
        proto.current = req
        if params.stream:
            proto.transport.write(stream_head(request_id, keep_alive=keep_alive))
        self.scheduler.add(req)
        self._wake.set()
        if self.state_log is not None:
            self.note_state()

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
            request_id, client_request_id, arrival_ns, err.status, fault, params.prompt_tokens, params.api
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
        api: str,
    ) -> None:
        self.counters["requests_error"] += 1
        if self.truth_log is None:
            return
        self.truth_log.write(
            rejected_record(request_id, client_request_id, arrival_ns, http_status, fault, prompt_tokens, api)
        )

    def finished(self, req: GenRequest, status: str, http_status: int) -> None:
        """A generation request ended: log it and let its connection serve the next request."""
        self.counters[f"requests_{status}"] += 1
        if req.params.api == "embeddings":  # its one engine step was a prefill: it generated nothing
            self.counters["generation_tokens"] -= req.generated
        if status == "ok":
            self.metrics.finished_ok(
                req.arrival_ns, time.perf_counter_ns(), req.finish_reason, req.admitted_ns, req.first_token_ns
            )
        if self.truth_log is not None:
            self.truth_log.write(req.truth(status, http_status))
        if status == "ok" and req.proto.current is req:
            req.proto.response_done(req.keep_alive)

    def _metrics(self) -> bytes:
        sched = self.scheduler
        return self.metrics.render(
            self.profile.model,
            len(sched.running),
            sched,
            self.counters["prompt_tokens"],
            self.counters["generation_tokens"],
            None if self.prefix_cache is None else (self.prefix_cache.queries, self.prefix_cache.hits),
        )
