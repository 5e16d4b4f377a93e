"""The workload seam end to end: a real `RequestSession` and `run_request` against the scripted server and
the simulator on 127.0.0.1, with the synthetic workload (the same bytes on the wire as before the seam) and
two small workloads defined here, which need no edit to the client or the wire format to run."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.scripted_server import (
    Handler,
    Request,
    Responder,
    ScriptedServer,
    chat_chunk,
    normal_stream,
    sse,
)
from tests.unit.test_request_bodies import SMALL_CHAT, SMALL_COMPLETIONS
from tui.engine.config import Endpoint, TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import make_client
from tui.engine.workload import Message, RequestKey, RequestSpec, Workload
from tui.sim.launch import SimServer
from tui.sim.perf_model import PROFILES

pytestmark = pytest.mark.timeout(30)


class FixedPrompts:
    """A dataset in miniature: the prompts of a list in turn, each with its own sampling seed."""

    wants_replies = False

    def __init__(self, prompts: list[str], max_tokens: int) -> None:
        self.prompts = prompts
        self.max_tokens = max_tokens
        self.finished: list[tuple[RequestKey, str]] = []

    def next_request(self, key: RequestKey) -> RequestSpec:
        prompt = self.prompts[key.seq % len(self.prompts)]
        return RequestSpec(
            prompt=prompt,
            max_tokens=self.max_tokens,
            extra_fields=(("seed", key.seq), ("temperature", 0.5)),
            expected_input_tokens=len(prompt.split()),
        )

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        assert reply_text is None  # not asked for: the client kept no text
        self.finished.append((key, record.status))


@dataclass
class Conversations:
    """Multi-turn in miniature: each user's history grows by its question and the model's reply."""

    max_tokens: int = 4
    wants_replies: bool = True
    history: dict[tuple[int, int] | None, tuple[Message, ...]] = field(default_factory=dict)
    replies: list[tuple[str, str | None]] = field(default_factory=list)
    fail_hook: bool = False

    def next_request(self, key: RequestKey) -> RequestSpec:
        past = self.history.get(key.user_key, ())
        question = Message("user", f"question {len(past) // 2 + 1} from user {key.user}")
        return RequestSpec(messages=(*past, question), max_tokens=self.max_tokens, fixed_osl=True)

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        if self.fail_hook:
            raise RuntimeError("history is full")
        self.replies.append((record.status, reply_text))
        if record.status == "ok" and reply_text is not None:
            assert spec.messages is not None
            self.history[key.user_key] = (*spec.messages, Message("assistant", reply_text))


@dataclass
class Wire:
    server: ScriptedServer
    target: TargetConfig

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.server.requests]


@contextlib.asynccontextmanager
async def _serve(
    handler: Handler, endpoint: Endpoint = "chat", extra_body: tuple[tuple[str, object], ...] = ()
) -> AsyncIterator[Wire]:
    """A scripted server on 127.0.0.1 port 0 and a target pointing at it."""
    server = await ScriptedServer(handler).start()
    try:
        url = server.url
        yield Wire(server, TargetConfig(url, "m", endpoint, extra_body=extra_body, timeout_s=5))
    finally:
        await server.close()


async def _send(
    wire: Wire, workload: WorkloadConfig | Workload, keys: list[tuple[int, int | None]], *, worker: int = 0
) -> list[RequestRecord]:
    """Run one request per (seq, user) in order through a real session; the records."""
    client = make_client(wire.target)
    session = RequestSession(client, wire.target, workload, "m", worker=worker)
    records = []
    try:
        for seq, user in keys:
            record = RequestRecord(request_id=seq + 1, worker=worker, seq=seq, level_id=1, sent_ns=0)
            records.append(await run_request(session, record, StreamAccumulator(), user=user))
    finally:
        await client.aclose()
    return records


async def _answer(req: Request, resp: Responder) -> None:
    """A reply that names the request's last message, with a reasoning chunk that must stay out of it."""
    body = json.loads(req.body)
    last = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
    await resp.head()
    await resp.send(sse(chat_chunk(reasoning="hmm ")))
    for ev in normal_stream(["re: ", last]):
        await resp.send(ev)
    await resp.end()


async def _no_usage(req: Request, resp: Responder) -> None:
    await resp.head()
    await resp.send(sse(chat_chunk("x")))
    await resp.send(sse(chat_chunk(finish="stop")))
    await resp.send(sse("[DONE]"))
    await resp.end()


async def test_synthetic_bodies_on_the_wire_are_the_recorded_bytes() -> None:
    """The same bytes as before the seam, through the real client (also the body retried without the
    fixed-OSL fields after a server rejected them)."""
    config = WorkloadConfig(isl=6, osl=4, seed=3)
    async with _serve(_no_usage) as wire:
        (rec,) = await _send(wire, config, [(2, None)], worker=1)
        assert rec.status == "ok", rec.error
        assert wire.server.requests[0].body == SMALL_CHAT
        assert (rec.input_tokens, rec.input_source) == (6, "estimate")

    async def picky(req: Request, resp: Responder) -> None:
        if b"ignore_eos" in req.body:
            await resp.json(400, b'{"message": "unknown field: ignore_eos"}')
            return
        await _no_usage(req, resp)

    async with _serve(picky, endpoint="completions") as wire:
        (rec,) = await _send(wire, config, [(5, None)])
        assert rec.status == "ok" and rec.retries == 1, rec.error
        assert [r.body for r in wire.server.requests][1] == SMALL_COMPLETIONS


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_a_new_workload_needs_no_client_edit(endpoint: Endpoint) -> None:
    prompts = ["first prompt here", "second one", "the third and last prompt"]
    workload = FixedPrompts(prompts, max_tokens=5)
    async with _serve(_no_usage, endpoint=endpoint, extra_body=(("temperature", 1.0),)) as wire:
        records = await _send(wire, workload, [(seq, None) for seq in range(4)])
        bodies = wire.bodies()
    assert [r.status for r in records] == ["ok"] * 4
    sent = [b["messages"][0]["content"] if endpoint == "chat" else b["prompt"] for b in bodies]
    assert sent == [*prompts, prompts[0]]
    assert [(b["max_tokens"], b["seed"], b["temperature"]) for b in bodies] == [(5, s, 1.0) for s in range(4)]
    assert not any("ignore_eos" in b for b in bodies)  # the workload did not ask for a fixed length
    # no usage from this server: the ISL is the workload's own estimate
    assert [r.input_tokens for r in records] == [3, 2, 5, 3]
    assert {r.input_source for r in records} == {"estimate"}
    assert [(k.seq, status) for k, status in workload.finished] == [(s, "ok") for s in range(4)]


async def test_a_conversation_sees_the_previous_reply_of_the_same_user() -> None:
    workload = Conversations()
    async with _serve(_answer) as wire:
        # two users interleaved, as a worker's closed-loop users would be
        records = await _send(wire, workload, [(0, 0), (1, 1), (2, 0), (3, 0), (4, 1)])
        bodies = wire.bodies()
    assert [r.status for r in records] == ["ok"] * 5
    msgs = [[(m["role"], m["content"]) for m in b["messages"]] for b in bodies]
    assert msgs[0] == [("user", "question 1 from user 0")]
    assert msgs[2] == [
        ("user", "question 1 from user 0"),
        ("assistant", "re: question 1 from user 0"),  # the reply only: the reasoning is not history
        ("user", "question 2 from user 0"),
    ]
    assert msgs[3][3:] == [("assistant", "re: question 2 from user 0"), ("user", "question 3 from user 0")]
    assert msgs[4] == [
        ("user", "question 1 from user 1"),
        ("assistant", "re: question 1 from user 1"),
        ("user", "question 2 from user 1"),
    ]
    assert all(b["ignore_eos"] is True and b["min_tokens"] == 4 for b in bodies)
    # usage came with every answer; the workload's missing estimate was never needed
    assert all(r.input_source == "usage" for r in records)


async def test_messages_on_the_completions_endpoint_fail_before_sending() -> None:
    async with _serve(_no_usage, endpoint="completions") as wire:
        (rec,) = await _send(wire, Conversations(), [(0, 0)])
        assert wire.server.requests == []
    assert (rec.status, rec.error_class) == ("error", "client")
    assert rec.error is not None and "chat endpoint" in rec.error


async def test_the_hook_sees_failed_requests_too() -> None:
    async def failing(req: Request, resp: Responder) -> None:
        await resp.json(500, b'{"error": {"message": "boom"}}')

    workload = Conversations()
    async with _serve(failing) as wire:
        (rec,) = await _send(wire, workload, [(0, 0)])
    assert rec.error_class == "http_5xx"
    assert workload.replies == [("error", "")]
    assert workload.history == {}


async def test_a_failing_hook_marks_the_record_and_keeps_its_stamps() -> None:
    async with _serve(_answer) as wire:
        (rec,) = await _send(wire, Conversations(fail_hook=True), [(0, 0)])
    assert (rec.status, rec.error_class) == ("error", "client")
    assert rec.error == "workload: RuntimeError: history is full"
    assert len(rec.chunk_ns) == 3 and rec.end_ns >= rec.chunk_ns[-1] > rec.sent_ns > 0


async def test_a_conversation_against_the_simulator() -> None:
    """The simulator counts every message's words: each turn's prompt holds the last one and its reply."""
    workload = Conversations(max_tokens=6)
    with SimServer("small-gpu", time_scale=20) as sim:
        target = TargetConfig(base_url=sim.url, timeout_s=10)
        client = make_client(target)
        session = RequestSession(client, target, workload, PROFILES["small-gpu"].model)
        records = []
        try:
            for seq in range(3):
                record = RequestRecord(request_id=seq + 1, worker=0, seq=seq, level_id=1, sent_ns=0)
                records.append(await run_request(session, record, StreamAccumulator(), user=0))
        finally:
            await client.aclose()
    assert [r.status for r in records] == ["ok"] * 3, [r.error for r in records]
    assert [r.output_tokens for r in records] == [6, 6, 6]
    isl = [r.input_tokens or 0 for r in records]
    assert all(r.input_source == "usage" for r in records)
    assert isl[0] < isl[1] < isl[2]
    assert all(reply for _, reply in workload.replies)
    history = workload.history[(0, 0)]
    assert [m.role for m in history] == ["user", "assistant"] * 3


async def test_a_workload_that_cannot_build_a_request_fails_it_without_sending() -> None:
    class Exhausted(FixedPrompts):
        def next_request(self, key: RequestKey) -> RequestSpec:
            raise LookupError("dataset exhausted")

    workload = Exhausted(["unused"], max_tokens=1)
    async with _serve(_no_usage) as wire:
        (rec,) = await _send(wire, workload, [(0, None)])
        assert wire.server.requests == []
    assert (rec.status, rec.error_class) == ("error", "client")
    assert rec.error == "LookupError: dataset exhausted"
    assert (rec.input_tokens, rec.input_source) == (None, "estimate")
    assert workload.finished == []  # nothing was asked, so nothing to answer
