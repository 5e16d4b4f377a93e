"""The simulator as a real server on 127.0.0.1 port 0, driven by a raw-socket client.

Servers are started once per module (each start is a subprocess, ~0.1 s) and run with `time_scale` so each
test is quick; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.sim_client import CHAT_TEMPLATE_TOKENS, Conn, call, chat_body
from tui.sim.launch import SimServer
from tui.sim.perf_model import PROFILES

MODEL = PROFILES["small-gpu"].model


@pytest.fixture(scope="module")
def truth_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sim") / "truth.jsonl"


@pytest.fixture(scope="module")
def sim(truth_path: Path) -> Iterator[SimServer]:
    """small-gpu 20x faster (steps of ~0.4-1 ms), with a truth log."""
    with SimServer("small-gpu", time_scale=20, truth_log=truth_path) as server:
        yield server


def truth_for(path: Path, client_request_id: str, *, timeout_s: float = 5.0) -> dict[str, Any]:
    """The truth-log line for a request, waiting (bounded) for the server to write it."""
    deadline = time.monotonic() + timeout_s
    while True:
        data = path.read_bytes()
        for line in data[: data.rfind(b"\n") + 1].splitlines():  # not a line the server is still writing
            record: dict[str, Any] = orjson.loads(line)
            if record["client_request_id"] == client_request_id:
                return record
        if time.monotonic() > deadline:
            raise AssertionError(f"no truth line for {client_request_id}")
        time.sleep(0.01)  # polling a file the server appends to, under a deadline


# --- endpoints and wire format ------------------------------------------------------------------------------


async def test_models_and_health(sim: SimServer) -> None:
    reply = await call(sim.port, "GET", "/v1/models")
    assert reply.status == 200
    assert reply.json()["data"][0]["id"] == MODEL
    assert (await call(sim.port, "GET", "/health")).status == 200


async def test_chat_stream_shape_and_exact_token_count(sim: SimServer) -> None:
    reply = await call(sim.port, "POST", "/v1/chat/completions", chat_body(12, words=7))
    assert reply.status == 200 and reply.error is None and reply.done
    assert reply.headers["content-type"].startswith("text/event-stream")
    chunks = reply.chunks()
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = [c["choices"][0]["delta"]["content"] for c in chunks[1:-2]]
    assert len(content) == 12 and all(content)
    assert chunks[-2]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {
        "prompt_tokens": 7 + 7,
        "completion_tokens": 12,
        "total_tokens": 26,
        "prompt_tokens_details": {"cached_tokens": 0},  # shorter than one cache block
    }
    assert len({c["id"] for c in chunks}) == 1
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == MODEL for c in chunks)


async def test_completions_stream_text(sim: SimServer) -> None:
    body = {"prompt": "one two three", "max_tokens": 5, "ignore_eos": True, "stream": True}
    reply = await call(sim.port, "POST", "/v1/completions", body)
    chunks = reply.chunks()
    assert [c["object"] for c in chunks] == ["text_completion"] * 6  # no usage chunk unless asked
    assert all(c["choices"][0]["text"] for c in chunks[:5])
    assert chunks[-1]["choices"][0]["finish_reason"] == "length" and chunks[-1]["choices"][0]["text"] == ""
    assert reply.done


async def test_non_streaming_chat_and_completions(sim: SimServer) -> None:
    reply = await call(sim.port, "POST", "/v1/chat/completions", chat_body(9, words=4, stream=False))
    body = reply.json()
    assert reply.status == 200 and body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant" and body["choices"][0]["message"]["content"]
    assert body["usage"] == {
        "prompt_tokens": 4 + 7,
        "completion_tokens": 9,
        "total_tokens": 20,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    reply = await call(sim.port, "POST", "/v1/completions", {"prompt": [[1, 2, 3]], "max_tokens": 3})
    body = reply.json()
    assert body["object"] == "text_completion" and body["choices"][0]["text"]
    assert body["usage"]["prompt_tokens"] == 3 and body["usage"]["completion_tokens"] <= 3


async def test_eos_is_seeded_and_min_tokens_holds(sim: SimServer) -> None:
    free = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4000, "seed": 5, "stream": False}
    a = (await call(sim.port, "POST", "/v1/chat/completions", free)).json()
    b = (await call(sim.port, "POST", "/v1/chat/completions", free)).json()
    assert a["choices"][0]["message"] == b["choices"][0]["message"]  # same seed, same answer
    n = a["usage"]["completion_tokens"]
    assert 1 <= n < 4000 and a["choices"][0]["finish_reason"] == "stop"
    at_least = {**free, "min_tokens": n + 5, "max_tokens": n + 5}
    c = (await call(sim.port, "POST", "/v1/chat/completions", at_least)).json()
    assert c["usage"]["completion_tokens"] == n + 5
    capped = {**free, "max_completion_tokens": 3}
    d = (await call(sim.port, "POST", "/v1/chat/completions", capped)).json()
    assert d["usage"]["completion_tokens"] == min(3, n)


async def test_keep_alive_and_connection_close(sim: SimServer) -> None:
    conn = await Conn.open(sim.port)
    try:
        for _ in range(3):
            reply = await conn.call("POST", "/v1/chat/completions", chat_body(3))
            assert reply.done and "connection" not in reply.headers
        reply = await conn.call("GET", "/v1/models", headers={"connection": "close"})
        assert reply.status == 200 and reply.headers["connection"] == "close"
        assert await asyncio.wait_for(conn.reader.read(), 5.0) == b""  # the server closed its end
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "param"),
    [
        ("POST", "/v1/chat/completions", b"{not json", 400, None),
        ("POST", "/v1/chat/completions", {"max_tokens": 5}, 400, "messages"),
        ("POST", "/v1/completions", {"max_tokens": 5}, 400, "prompt"),
        ("POST", "/v1/chat/completions", {**chat_body(5), "max_tokens": 0}, 400, "max_tokens"),
        ("POST", "/v1/chat/completions", {**chat_body(5), "max_tokens": 100_000}, 400, "max_tokens"),
        ("POST", "/v1/chat/completions", {**chat_body(5), "model": "gpt-9"}, 404, "model"),
        ("GET", "/v1/nope", None, 404, None),
        ("GET", "/v1/chat/completions", None, 405, None),
        ("POST", "/v1/models", b"{}", 405, None),
    ],
)
async def test_errors_have_openai_shape(
    sim: SimServer, method: str, path: str, body: object, status: int, param: str | None
) -> None:
    reply = await call(sim.port, method, path, body)
    assert reply.status == status
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"] and error["type"] and error["param"] == param
    if status == 405:
        assert reply.headers["allow"] in ("GET", "POST")


async def test_malformed_request_line_gets_400_and_close(sim: SimServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", sim.port)
    writer.write(b"NONSENSE\r\n\r\n")
    data = await asyncio.wait_for(reader.read(), 5.0)  # read to EOF: the server closes
    writer.close()
    assert data.startswith(b"HTTP/1.1 400 ") and b'"error"' in data


# --- the truth log ------------------------------------------------------------------------------------------


@pytest.mark.timing
async def test_truth_log_agrees_with_the_client(tmp_path: Path) -> None:
    """At the profile's own pace (a token every ~7 ms): 20x faster, chunks came every 0.4-1 ms and a client
    delayed by a busy machine fell behind them (median lag 4.8 ms), which says nothing of the stamps."""
    truth_path = tmp_path / "truth.jsonl"
    rid = "truth-1"
    with SimServer("small-gpu", truth_log=truth_path) as sim:
        reply = await call(
            sim.port, "POST", "/v1/chat/completions", chat_body(20), headers={"x-tokentop-request-id": rid}
        )
        truth = truth_for(truth_path, rid)
    texts = reply.text_events()
    usage = reply.chunks()[-1]["usage"]
    assert truth["id"] == reply.chunks()[0]["id"]
    assert truth["status"] == "ok" and truth["fault"] is None
    assert truth["prompt_tokens"] == usage["prompt_tokens"] == 32 + CHAT_TEMPLATE_TOKENS
    assert truth["completion_tokens"] == usage["completion_tokens"] == 20 == sum(truth["chunk_tokens"])
    assert len(truth["chunk_ns"]) == len(texts) == 20
    assert reply.sent_ns <= truth["arrival_ns"] <= truth["admitted_ns"] <= truth["first_token_ns"]
    assert truth["first_token_ns"] == truth["chunk_ns"][0] and truth["chunk_ns"][-1] <= truth["end_ns"]
    # Same clock in both processes: each chunk arrives just after the server stamped it, well within the
    # ~7 ms step (a stamp taken a step early would read a lag of a step or more).
    lag_ms = [(ns - server_ns) / 1e6 for (ns, _, _), server_ns in zip(texts, truth["chunk_ns"], strict=True)]
    assert min(lag_ms) >= 0
    assert statistics.median(lag_ms) < 3.5 and max(lag_ms) < 50.0, lag_ms


async def test_client_disconnect_is_logged_and_frees_the_slot(sim: SimServer, truth_path: Path) -> None:
    conn = await Conn.open(sim.port)
    await conn.send(
        "POST", "/v1/chat/completions", chat_body(2000), headers={"x-tokentop-request-id": "gone"}
    )
    await asyncio.wait_for(conn.reader.readuntil(b'"content"'), 5.0)  # the stream has started
    await conn.close()
    truth = truth_for(truth_path, "gone")
    assert truth["status"] == "disconnected" and 0 < truth["completion_tokens"] < 2000
    metrics = (await call(sim.port, "GET", "/metrics")).body.decode()
    assert f'vllm:num_requests_running{{model_name="{MODEL}"}} 0' in metrics


# --- realism options ----------------------------------------------------------------------------------------


async def test_multi_token_chunks(tmp_path: Path) -> None:
    truth = tmp_path / "t.jsonl"
    with SimServer("small-gpu", time_scale=20, tokens_per_chunk=4, truth_log=truth) as server:
        reply = await call(
            server.port, "POST", "/v1/chat/completions", chat_body(18), headers={"x-tokentop-request-id": "m"}
        )
        record = truth_for(truth, "m")
    assert record["chunk_tokens"] == [1, 4, 4, 4, 4, 1]  # the first token alone, like vLLM's stream interval
    assert len(reply.text_events()) == 6
    assert reply.chunks()[-1]["usage"]["completion_tokens"] == 18


async def test_reasoning_deltas_come_first() -> None:
    with SimServer("small-gpu", time_scale=20, reasoning_tokens=5) as server:
        reply = await call(server.port, "POST", "/v1/chat/completions", chat_body(12))
        plain = await call(server.port, "POST", "/v1/chat/completions", chat_body(12, stream=False))
    fields = [name for _, name, _ in reply.text_events()]
    assert fields == ["reasoning_content"] * 5 + ["content"] * 7
    usage = reply.chunks()[-1]["usage"]
    assert usage["completion_tokens"] == 12 and usage["completion_tokens_details"] == {"reasoning_tokens": 5}
    message = plain.json()["choices"][0]["message"]
    assert message["reasoning_content"] and message["content"]


# --- saturation ---------------------------------------------------------------------------------------------


async def _stream_stats(port: int, concurrency: int, max_tokens: int) -> tuple[float, float, float]:
    """Run `concurrency` streams at once; (output tok/s in all, mean TTFT s, mean per-stream ITL s)."""

    async def one() -> tuple[int, float, float]:
        reply = await call(port, "POST", "/v1/chat/completions", chat_body(max_tokens))
        times = [ns for ns, _, _ in reply.text_events()]
        assert len(times) == max_tokens, reply.error
        return (
            reply.sent_ns,
            (times[0] - reply.sent_ns) / 1e9,
            (times[-1] - times[0]) / 1e9 / (len(times) - 1),
        )

    start = time.perf_counter_ns()
    results = await asyncio.gather(*(one() for _ in range(concurrency)))
    elapsed_s = (time.perf_counter_ns() - start) / 1e9
    tokens_per_s = concurrency * max_tokens / elapsed_s
    return tokens_per_s, statistics.mean(r[1] for r in results), statistics.mean(r[2] for r in results)


async def test_throughput_rises_then_saturates_and_ttft_grows() -> None:
    with SimServer("small-gpu", time_scale=1) as server:
        await _stream_stats(server.port, 1, 4)  # warm up
        tps1, ttft1, itl1 = await _stream_stats(server.port, 1, 48)
        tps64, ttft64, itl64 = await _stream_stats(server.port, 64, 48)
    ratio = tps64 / tps1
    assert 4 < ratio < 0.75 * 64, (tps1, tps64)
    assert itl64 > 1.4 * itl1, (itl1, itl64)  # each stream slows down
    assert ttft64 > 3 * ttft1, (ttft1, ttft64)  # 64 prompts prefill together (compute-bound)


async def test_pipelined_requests_are_answered_in_order(sim: SimServer) -> None:
    conn = await Conn.open(sim.port)
    try:
        body = orjson.dumps(chat_body(4))
        stream = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        conn.writer.write(stream + b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n")
        first = await conn.reply()
        second = await conn.reply()
    finally:
        await conn.close()
    assert first.done and len(first.text_events()) == 4
    assert second.status == 200 and second.json()["data"][0]["id"] == MODEL


async def test_expect_100_continue(sim: SimServer) -> None:
    conn = await Conn.open(sim.port)
    try:
        body = orjson.dumps(chat_body(2, stream=False))
        head = "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\n"
        head += f"content-length: {len(body)}"
        conn.writer.write(head.encode() + b"\r\n\r\n")
        interim = await asyncio.wait_for(conn.reader.readuntil(b"\r\n\r\n"), 5.0)
        conn.writer.write(body)
        reply = await conn.reply()
    finally:
        await conn.close()
    assert interim.startswith(b"HTTP/1.1 100 Continue")
    assert reply.status == 200 and reply.json()["usage"]["completion_tokens"] == 2


# --- the prefix cache ---------------------------------------------------------------------------------------


def _prompt(head: str, words: int) -> dict[str, Any]:
    body = chat_body(2, words=words, stream=False)
    body["messages"][0]["content"] = head + " " + body["messages"][0]["content"]
    return body


async def test_a_shared_prefix_is_served_from_the_cache_in_whole_blocks(sim: SimServer) -> None:
    async def cached(body: dict[str, Any]) -> tuple[int, int]:
        usage = (await call(sim.port, "POST", "/v1/chat/completions", body)).json()["usage"]
        return usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]

    first = await cached(_prompt("prefixcachetest alpha", 60))
    again = await cached(_prompt("prefixcachetest alpha", 60))
    other = await cached(_prompt("prefixcachetest beta", 60))
    fresh = await cached(_prompt("elsewhere entirely", 60))
    assert first == (4 + 2 + 60 + CHAT_TEMPLATE_TOKENS, 0)  # "prefixcachetest" is 4 tokens, "alpha" 2
    assert again == (73, 64)  # whole 16-token blocks only
    assert other == (72, 0)  # the first block already differs
    assert fresh[1] == 0


async def test_without_the_prefix_cache_nothing_is_reported() -> None:
    with SimServer("small-gpu", time_scale=20, extra_args=("--no-prefix-cache",)) as server:
        body = _prompt("prefixcachetest", 60)
        for _ in range(2):
            usage = (await call(server.port, "POST", "/v1/chat/completions", body)).json()["usage"]
            assert "prompt_tokens_details" not in usage


# --- the other APIs ---------------------------------------------------------------------------------------

ANTHROPIC = {"anthropic-version": "2023-06-01"}


async def test_responses_and_messages_streams_and_whole_answers(sim: SimServer) -> None:
    prompt = " ".join(["word"] * 7)
    body = {"input": prompt, "max_output_tokens": 5, "ignore_eos": True, "stream": True}
    events = (await call(sim.port, "POST", "/v1/responses", body)).chunks()
    assert [e["type"] for e in events] == [
        "response.created",
        *["response.output_text.delta"] * 5,
        "response.incomplete",
    ]
    usage = events[-1]["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (7 + 7, 5)
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 4,
        "ignore_eos": True,
        "stream": True,
    }
    reply = await call(sim.port, "POST", "/v1/messages", body, headers=ANTHROPIC)
    kinds = [e["type"] for e in reply.chunks()]
    deltas = ["content_block_delta"] * 4
    assert kinds == ["message_start", "content_block_start", *deltas, "content_block_stop", "message_delta",
                     "message_stop"]  # fmt: skip
    assert not reply.done and reply.error is None  # no [DONE]: the body ends after message_stop
    assert reply.chunks()[0]["message"]["usage"]["input_tokens"] == 7 + 7
    assert reply.chunks()[-2]["usage"] == {"output_tokens": 4}
    body["stream"] = False
    whole = (await call(sim.port, "POST", "/v1/messages", body, headers=ANTHROPIC)).json()
    assert (
        whole["type"] == "message"
        and whole["content"][0]["type"] == "text"
        and whole["stop_reason"] == "max_tokens"
    )
    whole = (await call(sim.port, "POST", "/v1/embeddings", {"input": prompt})).json()
    assert whole["usage"] == {"prompt_tokens": 7, "total_tokens": 7} and whole["data"][0]["embedding"]


@pytest.mark.parametrize(
    ("path", "body", "headers", "message"),
    [
        ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}]}, ANTHROPIC, "max_tokens"),
        ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}, {},
         "anthropic-version"),
        ("/v1/responses", {"max_output_tokens": 4}, {}, "input"),
        ("/v1/embeddings", {"input": 5}, {}, "input"),
    ],
)  # fmt: skip
async def test_the_other_apis_refuse_bad_requests_in_their_shape(
    sim: SimServer, path: str, body: object, headers: dict[str, str], message: str
) -> None:
    reply = await call(sim.port, "POST", path, body, headers=headers)
    assert reply.status == 400
    answer = reply.json()
    if path == "/v1/messages":  # Anthropic's shape
        assert answer["type"] == "error" and message in answer["error"]["message"]
    else:
        assert message in answer["error"]["message"]
