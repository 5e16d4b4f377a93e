"""The model unloaded mid-run: the server answers every request 404 naming it. One line says so and the
load stops (every further request would get the same), classed apart from an outage (the server is up)."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.support.scripted_server import Request, Responder, ScriptedServer, ThreadedServer, normal_stream
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.control.guard import MODEL_GONE_AFTER, ConfigGuard
from tui.engine.host.handle import EngineHandle
from tui.engine.records import RequestRecord

pytestmark = pytest.mark.timeout(60)
MODEL = "gone-model"
SERVED = 6
"""Requests answered before the model goes away."""
GONE = json.dumps(
    {"error": {"message": f"The model `{MODEL}` does not exist.", "type": "NotFoundError", "code": 404}}
).encode()


def _rec(status: int | None, error: str | None = None) -> RequestRecord:
    rec = RequestRecord(1, 0, 0, 1, 0)
    if status is not None:
        rec.status, rec.error_class, rec.http_status, rec.error = "error", "http_4xx", status, error
    return rec


def test_the_guard_counts_404s_naming_the_model_in_a_row() -> None:
    guard = ConfigGuard(has_key=False, model=MODEL)
    gone = _rec(404, f"HTTP 404: The model `{MODEL}` does not exist.")
    assert guard.see([gone] * (MODEL_GONE_AFTER - 1) + [_rec(None)]) is None  # a success resets
    assert guard.see([_rec(404, "HTTP 404: Not Found")] * 5) is None  # a 404 not naming it: a path
    assert guard.see([gone] * (MODEL_GONE_AFTER - 1)) is None
    said = guard.see([gone])
    assert said == (
        f"the server no longer serves model {MODEL} (HTTP 404 on {MODEL_GONE_AFTER} requests in a row): "
        "load stopped"
    )
    assert guard.see([gone]) is None  # once
    assert ConfigGuard(has_key=False).see([gone] * 9) is None  # no model known: nothing to name
    # never served in this run: not gone, never there; the store's "every request fails" says it, in the
    # server's own words
    assert ConfigGuard(has_key=False, model=MODEL).see([gone] * 9) is None


def test_a_model_unloaded_mid_run_is_one_line_and_the_load_stops() -> None:
    hits: list[int] = []

    async def handler(req: Request, resp: Responder) -> None:
        if not req.path.endswith("/chat/completions"):  # the server view's /metrics
            await resp.json(404, b"{}")
            return
        hits.append(1)
        if len(hits) > SERVED:
            await resp.json(404, GONE)
            return
        await resp.head(200)
        for piece in normal_stream(["a", "b", "c"]):
            await resp.send(piece)
        await resp.end()

    with ThreadedServer(ScriptedServer(handler)) as server:
        target = TargetConfig(base_url=server.url, model=MODEL, timeout_s=10)
        handle = EngineHandle(target, WorkloadConfig(isl=8, osl=3), LoadTarget(concurrency=2), probe=False)
        handle.start()
        try:
            deadline = time.monotonic() + 30
            while handle.snapshot().fatal is None and time.monotonic() < deadline:
                time.sleep(0.05)
            snap = handle.snapshot()
            said = re.fullmatch(
                rf"the server no longer serves model {MODEL} \(HTTP 404 on (\d+) requests in a row\): "
                "load stopped",
                snap.fatal or "",
            )
            assert said and int(said[1]) >= MODEL_GONE_AFTER, snap.fatal
            time.sleep(0.5)  # requests already in flight end
            after = len(hits)
            time.sleep(1.0)
            assert len(hits) == after  # stopped: no back-off retries go on
            assert after - SERVED <= MODEL_GONE_AFTER + 9, after  # a few 404s, not a flood
            snap = handle.snapshot()
            assert snap.completed >= SERVED - 2 and snap.outages == ()  # the server answered: no outage
            assert 0 < dict(snap.errors).get("http_4xx", 0) <= MODEL_GONE_AFTER + 9
        finally:
            handle.stop()
