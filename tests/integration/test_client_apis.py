"""Responses, Messages and embeddings answers from a scripted server, on every transport: the events each
API sends read into the record, its error events classed, a stream cut before its end a disconnect."""

from __future__ import annotations

import json

import pytest

from tests.support.engine_helpers import run_requests
from tests.support.scripted_server import Request, Responder, ScriptedServer
from tui.engine.config import Endpoint, TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.stream.client import RequestSession
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import TransportName, make_client

pytestmark = pytest.mark.timeout(20)
TRANSPORTS: list[TransportName] = ["protocol", "aiohttp", "httpx"]
KEY = "sk-test-apis-0123456789"


def event(name: str, obj: dict[str, object]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()


def responses_delta(text: str, kind: str = "response.output_text.delta") -> bytes:
    return event(kind, {"type": kind, "item_id": "m", "output_index": 0, "content_index": 0, "delta": text})


RESPONSES_END = event(
    "response.completed",
    {
        "type": "response.completed",
        "response": {
            "status": "completed",
            "usage": {
                "input_tokens": 21,
                "input_tokens_details": {"cached_tokens": 5},
                "output_tokens": 9,
                "output_tokens_details": {"reasoning_tokens": 4},
            },
        },
    },
)
MESSAGES_START = event(
    "message_start",
    {
        "type": "message_start",
        "message": {"usage": {"input_tokens": 13, "cache_read_input_tokens": 8, "output_tokens": 1}},
    },
)


def messages_delta(text: str, kind: str = "text_delta") -> bytes:
    key = "thinking" if kind == "thinking_delta" else "text"
    return event(
        "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": kind, key: text}}
    )


MESSAGES_END = event(
    "message_delta",
    {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 7}},
) + event("message_stop", {"type": "message_stop"})


async def _one(
    api: Endpoint, transport: TransportName, reads: list[bytes] | bytes
) -> tuple[RequestRecord, StreamAccumulator, Request]:
    """One request of ``api``; the server answers the event stream ``reads`` (a list) or the JSON body."""

    async def handler(req: Request, resp: Responder) -> None:
        if isinstance(reads, bytes):
            await resp.json(200, reads)
            return
        await resp.head()
        for read in reads:
            await resp.send(read)
        await resp.end()

    server = await ScriptedServer(handler).start()
    target = TargetConfig(base_url=server.url, model="m", endpoint=api, api_key=KEY, timeout_s=5.0)
    client = make_client(target, transport)
    session = RequestSession(client, target, WorkloadConfig(isl=16, osl=8), "m", transport=transport)
    (rec,), (acc,) = await run_requests(session, client, server, 1)
    return rec, acc, server.requests[-1]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_responses_stream(transport: TransportName) -> None:
    reads = [
        event("response.created", {"type": "response.created", "response": {"status": "in_progress"}}),
        responses_delta("let me", "response.reasoning_summary_text.delta"),
        responses_delta(" think", "response.reasoning_text.delta"),
        responses_delta("Hello"),
        responses_delta(" there"),
        RESPONSES_END,
    ]
    rec, acc, req = await _one("responses", transport, reads)
    assert rec.status == "ok", rec.error
    assert req.path == "/v1/responses" and req.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(req.body)
    assert (body["stream"], body["max_output_tokens"], "stream_options" in body) == (True, 8, False)
    assert isinstance(body["input"], str) and body["ignore_eos"] is True
    assert "".join(acc.pending_text) == "Hello there" and "".join(acc.pending_reasoning) == "let me think"
    assert (rec.input_tokens, rec.input_source, rec.cached_tokens) == (21, "usage", 5)
    assert (rec.output_tokens, rec.output_source, rec.reasoning_tokens) == (9, "usage", 4)
    assert len(rec.chunk_ns) == 4 and rec.reasoning_chunks == 2
    assert rec.first_answer_ns == rec.chunk_ns[2] and rec.finish_reason == "completed"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_messages_stream(transport: TransportName) -> None:
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    reads = [
        MESSAGES_START,
        event("content_block_start", block),
        event("ping", {"type": "ping"}),
        messages_delta("hmm", "thinking_delta"),
        messages_delta("Hi"),
        messages_delta("!"),
        MESSAGES_END,
    ]
    rec, acc, req = await _one("messages", transport, reads)
    assert rec.status == "ok", rec.error
    assert req.path == "/v1/messages"
    assert (req.headers["x-api-key"], req.headers["anthropic-version"]) == (KEY, "2023-06-01")
    body = json.loads(req.body)
    assert body["max_tokens"] == 8 and body["messages"][0]["role"] == "user"
    assert "".join(acc.pending_text) == "Hi!" and acc.pending_reasoning == ["hmm"]
    # Anthropic counts cache reads apart from input_tokens: the prompt is both
    assert (rec.input_tokens, rec.cached_tokens, rec.output_tokens) == (21, 8, 7)
    assert rec.finish_reason == "max_tokens" and rec.reasoning_chunks == 1


@pytest.mark.parametrize(
    ("api", "reads", "message"),
    [
        ("responses", [responses_delta("a"), event("error", {"type": "error", "message": "boom"})],
         "stream error: boom"),
        ("responses", [responses_delta("a"), event("response.failed", {
            "type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error",
                                                                                  "message": "it broke"}}})],
         "stream error: it broke"),
        ("messages", [MESSAGES_START, messages_delta("a"), event("error", {
            "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})],
         "stream error: Overloaded"),
        # the same without its event line: read by its type
        ("messages", [MESSAGES_START, b'data: {"type":"error","error":{"message":"Overloaded"}}\n\n'],
         "stream error: Overloaded"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("transport", ["protocol", "httpx"])
async def test_error_events_are_stream_errors(
    api: Endpoint, reads: list[bytes], message: str, transport: TransportName
) -> None:
    rec, _, _ = await _one(api, transport, reads)
    assert (rec.status, rec.error_class, rec.error) == ("error", "stream_error", message)


@pytest.mark.parametrize(
    ("api", "reads", "class_"),
    [
        ("responses", [responses_delta("a"), responses_delta("b")], "disconnect"),
        ("messages", [MESSAGES_START, messages_delta("a"), messages_delta("b")], "disconnect"),
        # the stop reason and usage came; only message_stop is missing: kept, as a chat stream without [DONE]
        ("messages", [MESSAGES_START, messages_delta("a"), MESSAGES_END.split(b"event: message_stop")[0]],
         None),
    ],
)  # fmt: skip
@pytest.mark.parametrize("transport", ["protocol", "httpx"])
async def test_a_stream_cut_before_its_end(
    api: Endpoint, reads: list[bytes], class_: str | None, transport: TransportName
) -> None:
    rec, _, _ = await _one(api, transport, reads)
    assert rec.error_class == class_
    if class_ is not None:
        end = {"responses": "response.completed", "messages": "message_stop"}[api]
        assert rec.error == f"stream ended after 2 chunks, before {end}"
    else:
        assert (rec.output_tokens, rec.output_source) == (7, "usage")


EMBEDDING = json.dumps(
    {"object": "list", "data": [{"index": 0, "embedding": [0.1, 0.2]}], "usage": {"prompt_tokens": 19}}
).encode()


@pytest.mark.parametrize(
    ("answer", "class_"),
    [
        (EMBEDDING, None),
        (EMBEDDING[: len(EMBEDDING) // 2], "malformed"),
        (b'{"object": "list", "data": []}', "malformed"),
        (b'{"error": {"message": "no pooling model"}}', "stream_error"),
    ],
)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_embeddings_answer_is_read_whole(
    answer: bytes, class_: str | None, transport: TransportName
) -> None:
    rec, _, req = await _one("embeddings", transport, answer)
    assert req.path == "/v1/embeddings" and req.headers["accept"] == "application/json"
    body = json.loads(req.body)
    assert "stream" not in body and "max_tokens" not in body and isinstance(body["input"], str)
    assert rec.error_class == class_, rec.error
    assert rec.first_content_ns is None and len(rec.chunk_ns) == 0 and rec.output_tokens is None
    if class_ is None:
        assert (rec.input_tokens, rec.input_source) == (19, "usage")
        assert rec.first_byte_ns is not None and rec.sent_ns < rec.first_byte_ns <= rec.end_ns
