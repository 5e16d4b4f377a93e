"""``--endpoint /PATH``: a server whose API is not under ``/v1`` gets every request (the start-up probe's
model list beside the URL as given, the ISL probe's and the workers' requests) where the user said, and
nothing is guessed: no ``/v1`` is added."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.integration.test_engine_handle import ScriptedServerThread
from tests.support.engine_helpers import bench
from tests.support.scripted_server import Handler, Request, Responder, sse
from tui.cli import build_parser
from tui.cli.target import demo_from_args, target_from_args
from tui.configs import UsageError
from tui.engine.stream.openai import endpoint_url

pytestmark = pytest.mark.timeout(60)
PATH = "/api/v2/chat"
RUN = ("--no-server-metrics", "--concurrency", "1", "--requests", "3", "--isl", "16", "--osl", "3")


def _gateway(prefix: str, *, models: bool) -> Handler:
    """A server that answers only ``PREFIX/api/v2/chat`` (chat or completions bodies, streamed or not) and,
    with ``models``, ``PREFIX/models``; everything else is 404."""

    async def handler(req: Request, resp: Responder) -> None:
        if models and req.method == "GET" and req.path == prefix + "/models":
            await resp.json(200, json.dumps({"object": "list", "data": [{"id": "gw-model"}]}).encode())
            return
        if req.method != "POST" or req.path != prefix + PATH:
            await resp.json(404, b'{"error": {"message": "no such route"}}')
            return
        body = json.loads(req.body)
        chat = "messages" in body
        prompt = body["messages"][-1]["content"] if chat else body["prompt"]
        prompt_tokens = 9 + len(prompt.split())  # a count that grows with the prompt, as a server's does
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 3, "total_tokens": prompt_tokens + 3}
        if not body.get("stream"):  # the ISL probe
            await resp.json(200, json.dumps({"choices": [], "usage": usage}).encode())
            return
        await resp.head(200)
        for word in ("a", "b", "c"):
            choice = {"index": 0, "delta": {"content": word}} if chat else {"index": 0, "text": word}
            await resp.send(sse({"choices": [choice]}))
        await resp.send(sse({"choices": [], "usage": usage}))
        await resp.send(sse("[DONE]"))
        await resp.end()

    return handler


@pytest.mark.parametrize(
    ("prefix", "api", "models"),
    [("/gw", "chat", True), ("", "completions", False)],
)
def test_every_request_goes_to_the_given_path(tmp_path: Path, prefix: str, api: str, models: bool) -> None:
    out = tmp_path / "results.json"
    with ScriptedServerThread(_gateway(prefix, models=models)) as server:
        url = server.url.removesuffix("/v1") + prefix
        model = [] if models else ["--model", "m"]  # no model list: --model, and the probe's 404 is fine
        r = bench(
            "--url", url, "--endpoint", PATH, "--endpoint-type", api, *model, *RUN, "--output", str(out)
        )
        seen = server.requests
    assert r.returncode == 0, r.stderr
    posts = [q for q in seen if q.method == "POST"]
    assert {q.path for q in posts} == {prefix + PATH}
    assert {q.path for q in seen if q.method == "GET"} == {prefix + "/models"}
    probes = [q for q in posts if q.headers.get("x-tokentop-request-id", "").startswith("probe-")]
    assert len(probes) == 4 and len(posts) - len(probes) >= 3  # the ISL probe, then the run
    bodies = [json.loads(q.body) for q in posts]
    assert all(("messages" in b) == (api == "chat") for b in bodies)
    assert {b["model"] for b in bodies} == {"gw-model" if models else "m"}
    level = json.loads(out.read_text())["levels"][0]
    assert level["completed"] >= 3 and level["failed"] == 0 and level["mean_output_tokens"] == 3


def _ns(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["bench", *argv])


@pytest.mark.parametrize(
    ("argv", "url"),
    [
        (["--url", "http://h:8000"], "http://h:8000/v1/chat/completions"),
        (["--url", "http://h:8000/v1/", "--endpoint", "completions"], "http://h:8000/v1/completions"),
        (["--url", "http://h:8000", "--endpoint", "/api/v2/chat"], "http://h:8000/api/v2/chat"),
        (["--url", "http://h:8000/gw/", "--endpoint", "/chat?x=1"], "http://h:8000/gw/chat?x=1"),
        (["--url", "http://h:8000", "--endpoint", "/v1/completions", "--endpoint-type", "completions"],
         "http://h:8000/v1/completions"),
        (["--url", "http://h:8000", "--api", "responses"], "http://h:8000/v1/responses"),
        (["--url", "http://h:8000/v1", "--api", "messages"], "http://h:8000/v1/messages"),
        (["--url", "http://h:8000", "--api", "embeddings"], "http://h:8000/v1/embeddings"),
        (["--url", "http://h:8000", "--api", "messages", "--endpoint", "/anthropic/v1/messages"],
         "http://h:8000/anthropic/v1/messages"),
    ],
)  # fmt: skip
def test_request_urls(argv: list[str], url: str) -> None:
    assert endpoint_url(target_from_args(_ns(*argv))) == url


def test_a_path_without_a_url_is_refused_before_the_demo_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UsageError, match="--endpoint /PATH needs --url"):
        demo_from_args(_ns("--endpoint", "/api/v2/chat"))


def test_contradicting_flavours_are_one_line() -> None:
    with pytest.raises(UsageError, match="--endpoint chat and --api completions contradict"):
        target_from_args(_ns("--url", "http://h:1", "--endpoint", "chat", "--endpoint-type", "completions"))
    with pytest.raises(UsageError, match="--endpoint completions and --api messages contradict"):
        target_from_args(_ns("--url", "http://h:1", "--endpoint", "completions", "--api", "messages"))


@pytest.mark.parametrize(
    ("argv", "api"),
    [([], "chat"), (["--endpoint", "completions"], "completions"),
     (["--endpoint-type", "responses"], "responses"), (["--api", "embeddings"], "embeddings"),
     (["--api", "completions", "--endpoint", "completions"], "completions")],
)  # fmt: skip
def test_the_api_and_its_older_spellings(argv: list[str], api: str) -> None:
    assert target_from_args(_ns("--url", "http://h:1", *argv)).endpoint == api


@pytest.mark.parametrize("value", ["api/v2/chat", "http://h/api", "/a b"])
def test_a_bad_endpoint_is_one_line_exit_2(value: str) -> None:
    r = bench("--url", "http://127.0.0.1:9", "--endpoint", value, timeout_s=20)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"tokentop bench: error: argument --endpoint: want chat, completions or a request path starting "
        f"with /, got {value!r} (see --help)"
    ]
