"""A chat server that slows down as it runs: its token gap grows in proportion to the time since its first
answer began (a server warming up the wrong way, a neighbour's job growing). For the A/B tests: one such
server is both A and B, and what differs between two holds of the same load is only when they ran."""

from __future__ import annotations

import asyncio
import json
import time

from tests.support.scripted_server import (
    Request,
    Responder,
    ScriptedServer,
    ThreadedServer,
    chat_chunk,
    sse,
    usage_chunk,
)

MODEL = "drift"


class DriftServer(ThreadedServer):
    """``gap_ms`` between tokens at first, ``gap_ms * (1 + t / double_s)`` ``t`` seconds later: twice as slow
    after ``double_s``. Answers ``max_tokens`` tokens (16 without it), with usage."""

    def __init__(self, gap_ms: float = 5.0, double_s: float = 4.0) -> None:
        super().__init__(ScriptedServer(self._handle))
        self.gap_ms, self.double_s = gap_ms, double_s
        self.started: float | None = None
        """`time.monotonic()` of the first answer."""

    def __enter__(self) -> DriftServer:
        super().__enter__()
        return self

    def gap_s(self) -> float:
        """The token gap now."""
        now = time.monotonic()
        if self.started is None:
            self.started = now
        return self.gap_ms / 1000 * (1 + (now - self.started) / self.double_s)

    async def _handle(self, req: Request, resp: Responder) -> None:
        if req.path.endswith("/models"):
            await resp.json(
                200, json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
            )
            return
        if not req.path.endswith("/chat/completions"):  # /metrics: none, as a server started without them
            await resp.json(404, b"{}")
            return
        tokens = int(json.loads(req.body).get("max_tokens") or 16)
        await resp.head(200)
        await resp.send(sse(chat_chunk(role=True, content="")))
        for _ in range(tokens):
            await asyncio.sleep(self.gap_s())
            await resp.send(sse(chat_chunk("tok ")))
        await resp.send(sse(chat_chunk(finish="length")))
        await resp.send(sse(usage_chunk(8, tokens)))
        await resp.send(sse("[DONE]"))
        await resp.end()
