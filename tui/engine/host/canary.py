"""The canary user: one-token requests at a steady rate beside the load, the TTFT a new user would see now.

They are sent outside the load: never counted in a level (they never reach the `Store`), written to the
requests log marked `"canary": true`, sent as worker `CANARY_WORKER` (client request ids `9999-<n>`).
They run in a process of their own (an asyncio loop and the engine's streaming client, `run_request`), as
the load's workers do: from a thread of the face, the face's other threads (the engine's reader, the UI)
held the GIL while a canary's first token came in, and its TTFT read up to 35 ms long against the
simulator's record. Each prompt starts with a word of its own, so no prefix cache serves it: a new user
has nothing cached.
"""

from __future__ import annotations

import asyncio
import gc
import math
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import httpx
import numpy as np

from tui.engine.config import TargetConfig
from tui.engine.host.worker_pool import ensure_resource_tracker
from tui.engine.records import RequestRecord
from tui.engine.server_metrics.view import CanaryFigures
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import make_client
from tui.engine.workload.protocol import RequestKey, RequestSpec

CANARY_WORKER = 9999
"""The worker number of canary requests: their client request ids are `9999-<n>`."""

KEPT = 100_000
"""Canary results kept (a day at 1/s) for the per-level figures."""
TAIL_SLACK_NS = 120_000_000_000
"""How far before the live window the tail is still read: a canary request may take this long to end."""


def max_in_flight(rate: float) -> int:
    """Canary requests out at once: about a second's worth, at least 2; beyond it a tick is skipped. On a
    server slower than the rate (a CPU llama.cpp: seconds to a first token) more would fill its slots and
    queue behind each other, so the canary would measure its own load and starve the real one."""
    return max(2, math.ceil(rate))


class CanaryWorkload:
    """Single-token requests of ``words`` words, each opening with a word of its own."""

    wants_replies = False

    def __init__(self, words: int) -> None:
        self.words = max(1, words)

    def next_request(self, key: RequestKey) -> RequestSpec:
        text = f"canary{key.seq} " + " ".join(["hello"] * (self.words - 1))
        return RequestSpec(max_tokens=1, prompt=text.strip(), fixed_osl=True)

    def on_response(self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: Any) -> None:
        return None


class Canary:
    """Sends ``rate`` one-token requests a second from its own process; `figures` and `level` read what
    came back (taken from the process's pipe on each read, so no thread of the face waits on it)."""

    def __init__(
        self,
        target: TargetConfig,
        rate: float,
        *,
        words: int = 32,
        on_record: Callable[[RequestRecord], None] | None = None,
        window_s: float = 10.0,
        transport: str | None = None,
        trace_key: str = "",
    ) -> None:
        """``on_record``: each finished canary request, taken in on the face's side; ``trace_key``: the
        run's (`EngineOptions.trace_key`): each canary request carries a ``traceparent``, as the load's do."""
        if rate <= 0:
            raise ValueError("the canary rate must be positive")
        self.target = target
        self.rate = rate
        self.words = words
        self.window_s = window_s
        self._on_record = on_record
        self._transport = transport
        self._trace_key = trace_key
        self._samples: deque[tuple[int, float | None]] = deque(maxlen=KEPT)
        """(sent_ns, TTFT ms, or None for a failure) of each finished canary request."""
        self._proc: Any = None
        self._data: Connection | None = None
        self._stop: Any = None
        self._lock = threading.Lock()

    def start(self) -> Canary:
        """Spawn the canary's process (it resolves the model itself when the target names none)."""
        if self._proc is None:
            ensure_resource_tracker()
            ctx = multiprocessing.get_context("spawn")
            data_r, data_w = ctx.Pipe(duplex=False)
            self._stop = ctx.Event()
            loop = _CanaryLoop(self.target, self.rate, self.words, self._transport, self._trace_key, data_w,
                               self._stop, parent=os.getpid())  # fmt: skip
            self._proc = ctx.Process(target=canary_main, args=(loop,), name="tokentop-canary", daemon=True)
            self._proc.start()
            data_w.close()
            self._data = data_r
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop sending, take in what came back, end the process. Idempotent."""
        if self._proc is None:
            return
        self._stop.set()
        self._proc.join(timeout_s)
        if self._proc.is_alive():
            self._proc.kill()  # it ignores SIGTERM (`leave_signals_to_the_face`)
            self._proc.join(1.0)
        self._take_results()
        if self._data is not None:
            self._data.close()
            self._data = None

    def _take_results(self) -> None:
        """Take every finished canary request the process sent (a face's read, or the stop)."""
        with self._lock:
            data = self._data
            if data is None:
                return
            try:
                while data.poll():
                    sent_ns, ttft_ms, record = data.recv()
                    self._samples.append((sent_ns, ttft_ms))
                    if self._on_record is not None:
                        self._on_record(record)
            except (EOFError, OSError):
                self._data = None  # the process ended: what it sent is in

    # -- what it measured --

    def figures(self, now_ns: int | None = None) -> CanaryFigures:
        """The live window's canary TTFT: mean, p99 and the last one."""
        self._take_results()
        now = time.perf_counter_ns() if now_ns is None else now_ns
        t_from = now - int(self.window_s * 1e9)
        recent: list[tuple[int, float | None]] = []
        for sample in reversed(self._samples):  # the tail only: a face reads this every tick
            if sample[0] < t_from - TAIL_SLACK_NS:
                break  # finished in sent order but for the slow ones, which the slack covers
            recent.append(sample)
        stats = self._stats(t_from, now, recent)
        last = next((ttft for _, ttft in reversed(self._samples) if ttft is not None), None)
        return CanaryFigures(self.rate, stats["n"], stats["mean_ms"], stats["p99_ms"], last, stats["errors"])

    def level(self, t_from_ns: int, t_to_ns: int) -> dict[str, Any]:
        """The canary's figures over one level's window (requests sent inside it), for results."""
        self._take_results()
        return {"rate": self.rate, **self._stats(t_from_ns, t_to_ns)}

    def _stats(
        self, t_from_ns: int, t_to_ns: int, samples: list[tuple[int, float | None]] | None = None
    ) -> dict[str, Any]:
        found = list(self._samples) if samples is None else samples
        inside = [ttft for sent, ttft in found if t_from_ns <= sent <= t_to_ns]
        ok = np.array([t for t in inside if t is not None], dtype=float)
        return {
            "n": int(ok.size),
            "mean_ms": float(ok.mean()) if ok.size else None,
            "p99_ms": float(np.percentile(ok, 99)) if ok.size else None,
            "errors": len(inside) - int(ok.size),
        }


def canary_main(loop: _CanaryLoop) -> None:
    """The canary process: send until its ``stop`` is set (or the face is gone), each finished request's
    (sent_ns, TTFT ms or None, its `RequestRecord`) into its ``data``. Set up as a load worker is (the same
    loop, the same collector settings, nothing printed on the face's terminal, Ctrl-C left to the face),
    so its stamps are as true as the load's."""
    from tui.engine.load.worker import GC_YOUNG_THRESHOLD, _run_loop, leave_signals_to_the_face

    leave_signals_to_the_face()
    if not os.environ.get("TOKENTOP_WORKER_STDERR"):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 50, 50)
    try:
        _run_loop(loop.main())
    finally:
        loop.data.close()


@dataclass
class _CanaryLoop:
    """What the canary process runs: made by the face (``parent`` its pid) and handed to the process whole."""

    target: TargetConfig
    rate: float
    words: int
    transport: str | None
    trace_key: str
    data: Connection
    stop: Any
    parent: int

    def stopping(self) -> bool:
        return bool(self.stop.is_set()) or os.getppid() != self.parent

    async def main(self) -> None:
        client = make_client(self.target, self.transport)
        try:
            model = await self._resolve_model(client)
            session = RequestSession(
                client, self.target, CanaryWorkload(self.words), model, worker=CANARY_WORKER,
                trace_key=self.trace_key,
            )  # fmt: skip
            tasks: set[asyncio.Task[None]] = set()
            interval_s = 1.0 / self.rate
            limit = max_in_flight(self.rate)
            next_t = time.monotonic()
            seq = 0
            while not self.stopping():
                if len(tasks) < limit:
                    task = asyncio.ensure_future(self._one(session, seq))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    seq += 1
                next_t = max(next_t + interval_s, time.monotonic())  # late: no burst to catch up
                await asyncio.sleep(0)  # the request's task starts now, not after the wait
                while not self.stopping() and (delay_s := next_t - time.monotonic()) > 0:
                    await asyncio.sleep(min(delay_s, 0.2))  # stop is seen within 0.2 s
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await client.aclose()

    async def _resolve_model(self, client: httpx.AsyncClient) -> str:
        """The target's model, else `/v1/models`' first (asked until it answers, while not stopped)."""
        if self.target.model:
            return self.target.model
        headers = {"authorization": f"Bearer {self.target.api_key}"} if self.target.api_key else {}
        for _ in range(100):  # bounded: about 10 s for a server still starting
            try:
                response = await client.get(self.target.base_url + "/models", headers=headers)
                data = response.json().get("data") or []
                if data and isinstance(data[0], dict) and data[0].get("id"):
                    return str(data[0]["id"])
            except (httpx.HTTPError, ValueError, AttributeError):
                pass
            if self.stopping():
                break
            await asyncio.sleep(0.1)
        return ""

    async def _one(self, session: RequestSession, seq: int) -> None:
        record = RequestRecord(request_id=-(seq + 1), worker=CANARY_WORKER, seq=seq, level_id=0, sent_ns=0)
        await run_request(session, record, StreamAccumulator())
        ttft = record.ttft_ns
        ok = record.status == "ok" and ttft is not None
        try:
            self.data.send((record.sent_ns, ttft / 1e6 if ok and ttft is not None else None, record))
        except (OSError, ValueError):
            self.stop.set()  # the face is gone
