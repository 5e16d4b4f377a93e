"""The fault matrix through the live app: the real `TokentopApp` under Pilot and the real
`EngineHandle` (its worker in its own process) against one small misbehaving server per row, on 127.0.0.1.

Each row asserts what the screen says (the banner, the error class and its count in the errors pane, the
status line), that it said it within a bound, and that the load went on (a fault in some streams: the other
requests complete; failing requests: they back off) or stopped (a configuration error: nothing more
reaches the server, whatever key is pressed). The app's timer never fires (`make_app`): each wait polls
the app itself, a tick at a time, under a deadline. The bench side of the matrix is in tests/integration."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import pytest
from textual.pilot import Pilot

from tests.app.conftest import MakeApp, screen_text, settle
from tests.integration.conftest import no_dns  # noqa: F401 - the DNS row asks for it by name
from tests.support import frozen
from tests.support.fault_server import FaultServer
from tests.support.ports import free_port
from tests.support.scripted_server import (
    Request,
    Responder,
    ScriptedServer,
    ThreadedServer,
    chat_chunk,
    normal_stream,
    sse,
)
from tests.support.tls_server import HAVE_OPENSSL, SelfSigned, make_self_signed, serve, tls_server
from tui.app.app import TokentopApp
from tui.app.widgets.errors import errors_content
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle

pytestmark = pytest.mark.timeout(60)
USERS = 2
TICK_S = 0.1
"""How often a wait ticks the app: as often as the real app's timer does."""
STARTED_WITHIN_S = 20.0
"""From the app's start to the first figure on screen: the worker process is spawned and imports the
engine first (about a second; more on a busy 2-core machine)."""
SHOWN_WITHIN_S = 8.0
"""From the server committing a fault to the screen naming it: a worker batch (0.1 s) and a tick; measured
0.4-0.6 s on a quiet machine, up to 1.9 s at a load average of 16 on 2 cores, 0.5-1.3 s beside four busy
loops, and 4.9 s once in CI's first pass (six test processes, both cores never idle). A fault named only at
its request's timeout or the level's end would take longer still (the stall row adds the 3 s timeout)."""
PACE_S = 0.02
"""Between the events of a successful stream: about 7 requests a second per user."""
TIMEOUT_S = 3.0
"""The per-request timeout, which also bounds the silence between two chunks (the stall row). Not 2 s: the
servers are threads of this test process, and on a loaded machine (three suites at once, load 8-12 on 2
cores) a healthy stream of the stall row sent nothing for 2 s and counted as a timeout."""
SECRET = "sk-live-faults-" + "k3y" * 20
NOWHERE = "http://tokentop-test.invalid:8000/v1"

Fault = Callable[[Request, Responder], Awaitable[None]]


@dataclass
class Served:
    """One row's server, as the test sees it."""

    url: str
    api_key: str | None = None
    posts: Callable[[], int] = lambda: 0
    """Completion requests that reached the server so far."""
    faulted_at: list[float] = field(default_factory=list)
    """`time.monotonic()` of each fault the server committed (the scripted rows)."""
    users: int = USERS


# --- the servers ------------------------------------------------------------------------------------


async def _answer(req: Request, resp: Responder) -> None:
    """Lists a model; streams three words ``PACE_S`` apart (a paced success keeps the load light)."""
    if req.method == "GET":
        await serve(req, resp)
        return
    await resp.head()
    for event in normal_stream(["a", "b", "c"]):
        await resp.send(event)
        await asyncio.sleep(PACE_S)
    await resp.end()


def _every_other(fault: Fault, faulted_at: list[float]) -> Callable[[ScriptedServer], Fault]:
    """A handler that answers as `_answer` does, except every other completion request, which gets
    ``fault``: the run has successes to continue with."""

    def bind(server: ScriptedServer) -> Fault:
        async def handler(req: Request, resp: Responder) -> None:
            posts = sum(r.method == "POST" for r in server.requests)
            if req.method == "POST" and posts % 2 == 1:
                faulted_at.append(time.monotonic())
                await fault(req, resp)
            else:
                await _answer(req, resp)

        return handler

    return bind


async def _disconnect(req: Request, resp: Responder) -> None:
    await resp.head()
    await resp.send(sse(chat_chunk(role=True, content="")) + sse(chat_chunk("a")) + sse(chat_chunk("b")))
    resp.abort()


async def _stall(req: Request, resp: Responder) -> None:
    await resp.head()
    await resp.send(sse(chat_chunk(role=True, content="")) + sse(chat_chunk("a")) + sse(chat_chunk("b")))
    await asyncio.sleep(30)  # silent, connection open: the client's timeout ends it (cancelled at close)


async def _malformed(req: Request, resp: Responder) -> None:
    await resp.head()
    await resp.send(sse(chat_chunk(role=True, content="")) + sse(chat_chunk("a")))
    await resp.send(b'data: {"choices": [{"index": 0, "delta": {"content": "\n\n')  # cut short, not JSON
    for event in (chat_chunk("b"), chat_chunk("c"), chat_chunk(finish="stop"), "[DONE]"):
        await resp.send(sse(event))
    await resp.end()


async def _stream_error(req: Request, resp: Responder) -> None:
    await resp.head()
    await resp.send(sse(chat_chunk("a")))
    await resp.send(sse({"error": {"message": "engine died", "code": 500}}))
    await resp.end()


async def _not_sse(req: Request, resp: Responder) -> None:
    message = {"index": 0, "message": {"role": "assistant", "content": "a b c"}, "finish_reason": "stop"}
    body = {"id": "x", "object": "chat.completion", "choices": [message]}
    await resp.json(200, orjson.dumps(body))


async def _oversized(req: Request, resp: Responder) -> None:
    await resp.head()
    await resp.send(sse(chat_chunk("a")))
    await resp.send(b"data: " + b"x" * (2 << 20))  # 2 MiB and no newline: past the decoder's 1 MiB cap
    await resp.end()


def _fixed_osl_rejected(*, together: int = 1, after_s: float = 0.0) -> Callable[[ScriptedServer], Fault]:
    """A server that knows no ignore_eos (as some hosted APIs): 400 naming it, else a normal stream. With
    ``together`` > 1 it holds each such request until that many have arrived (at most 2 s), so they are
    all in flight when the first 400 is read; ``after_s`` delays each such 400 (a slow gateway)."""

    def bind(server: ScriptedServer) -> Fault:
        async def handler(req: Request, resp: Responder) -> None:
            if req.method != "POST" or b"ignore_eos" not in req.body:
                await _answer(req, resp)
                return
            for _ in range(100):
                if sum(b"ignore_eos" in r.body for r in server.requests) >= together:
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(after_s)
            await resp.json(
                400, b'{"error": {"message": "Unrecognized request argument supplied: ignore_eos"}}'
            )

        return handler

    return bind


FIXED_OSL_SERVERS = {
    "fixed_osl_400": _fixed_osl_rejected(),
    "fixed_osl_400_late": _fixed_osl_rejected(after_s=0.3),
    "fixed_osl_400_together": _fixed_osl_rejected(together=USERS),
}


SCRIPTED: dict[str, Fault] = {
    "disconnect": _disconnect,
    "stall": _stall,
    "malformed": _malformed,
    "stream_error": _stream_error,
    "not_sse": _not_sse,
    "oversized": _oversized,
}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> SelfSigned:
    return make_self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    """The row's server, by name (indirect parametrization): ``refused``, ``dns``, ``tls``, ``http_NNN``
    (every completion gets that status), one of `FIXED_OSL_SERVERS`, or a `SCRIPTED` fault every other
    request. Each runs in a thread, off the loop the app runs on."""
    row: str = request.param
    if row == "refused":
        yield Served(f"http://127.0.0.1:{free_port()}/v1")
        return
    if row == "dns":
        request.getfixturevalue("no_dns")
        yield Served(NOWHERE)
        return
    if row.startswith("http_"):
        status = int(row.removeprefix("http_"))
        headers = {"retry-after": "1"} if status == 429 else None
        with FaultServer(status, headers=headers) as fault_server:
            yield Served(fault_server.url, SECRET if status == 401 else None, lambda: fault_server.hits)
        return
    faulted_at: list[float] = []
    if row == "tls":
        server = tls_server(request.getfixturevalue("pair"))
    elif row in FIXED_OSL_SERVERS:
        server = ScriptedServer(_answer)
        server.handler = FIXED_OSL_SERVERS[row](server)
    else:
        server = ScriptedServer(_answer)
        server.handler = _every_other(SCRIPTED[row], faulted_at)(server)
    users = USERS if row == "fixed_osl_400_together" or row in SCRIPTED else 1
    with ThreadedServer(server):
        posts = lambda: sum(r.method == "POST" for r in server.requests)  # noqa: E731
        yield Served(server.url, None, posts, faulted_at, users)


@pytest.fixture
def engine(served: Served) -> Iterator[EngineHandle]:
    """The real engine for `make_app` (this overrides its fake one): one worker process, short timeouts."""
    # connect 5 s: no row waits it out, but the TLS row's handshake is with a server thread of this busy
    # process, and on a loaded machine it took over 2 s ("connect timeout" instead of the certificate)
    target = TargetConfig(
        base_url=served.url, api_key=served.api_key, timeout_s=TIMEOUT_S, connect_timeout_s=5
    )
    options = EngineOptions(server_metrics=False)
    handle = EngineHandle(
        target, WorkloadConfig(isl=8, osl=3), LoadTarget(concurrency=served.users), options=options
    )
    handle.start()
    try:
        yield handle
    finally:
        handle.stop(timeout_s=2.0)


# --- reading the screen -----------------------------------------------------------------------------


def flat(text: str) -> str:
    """The screen's words in order, whitespace collapsed: a banner wrapped over two rows still reads."""
    return " ".join(text.split())


def pane(app: TokentopApp, text: str, selector: str, *, inside: bool = False) -> str:
    """The part of the screen one widget covers, words in order: its border and title included, or with
    ``inside`` only what is inside the border (so a message wrapped over rows reads as one)."""
    region = app.query_one(selector).region
    if inside:
        region = region.shrink((1, 1, 1, 1))
    rows = text.splitlines()[region.y : region.y + region.height]
    return flat("\n".join(row[region.x : region.x + region.width] for row in rows))


def count(pattern: str, text: str) -> int:
    """The number in ``pattern``'s one group on screen, 0 when it is not shown."""
    found = re.search(pattern, text)
    return int(found.group(1)) if found else 0


def shown(app: TokentopApp, text: str, error_class: str) -> int:
    """How many failures of ``error_class`` the errors pane counts."""
    return count(rf"(\d+) {re.escape(error_class)}\b", pane(app, text, "#errors", inside=True))


def done(text: str) -> int:
    return count(r"done (\d+)", flat(text))


async def until(
    app: TokentopApp, pilot: Pilot[Any], what: str, ok: Callable[[str], bool], timeout_s: float
) -> tuple[str, float]:
    """Tick the app until ``ok(screen text)``; (the screen, seconds waited); fails after ``timeout_s``."""
    t0 = time.monotonic()
    text = ""
    while time.monotonic() - t0 < timeout_s:
        app.poll()
        await settle(pilot)
        text = screen_text(app)
        if ok(text):
            return text, time.monotonic() - t0
        await pilot.pause(TICK_S)
    raise AssertionError(f"no {what} on screen within {timeout_s} s; the screen:\n{text}")


async def watch(app: TokentopApp, pilot: Pilot[Any], seconds: float) -> str:
    """Keep the app ticking for ``seconds`` (an observation window: what the server sees meanwhile)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        app.poll()
        await pilot.pause(TICK_S)
    app.poll()
    await settle(pilot)
    return screen_text(app)


# --- configuration errors: the run stops --------------------------------------------------------------

PROBE_ROWS = [
    pytest.param("refused", "cannot connect to http://127.0.0.1:", id="refused"),
    pytest.param("dns", f"{NOWHERE}: cannot resolve host tokentop-test.invalid", id="dns"),
    pytest.param(
        "tls",
        "TLS: certificate verify failed: self",  # OpenSSL 3 "self-signed certificate", 1.1 "self signed"
        id="tls",
        marks=pytest.mark.skipif(not HAVE_OPENSSL, reason="needs the openssl binary to make a certificate"),
    ),
]


@pytest.mark.parametrize(("served", "reason"), PROBE_ROWS, indirect=["served"])
async def test_a_server_that_cannot_be_used_stops_the_run_with_a_banner(
    served: Served, engine: EngineHandle, make_app: MakeApp, reason: str
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        text, took_s = await until(app, pilot, "banner", lambda t: "engine stopped" in t, 10.0)
        text = await watch(app, pilot, 0.3)
        banner, status = pane(app, text, "#fatal"), pane(app, text, "#status")
    assert banner.startswith("✗ engine stopped: ") and reason in banner and banner.endswith("(q quits)"), (
        banner
    )
    if served.url.startswith("https"):
        assert "(use --ca-cert or --insecure)" in banner  # says what to do
    assert took_s < 10.0
    assert "in flight 0" in status and "done 0" in status and "failed 0" in status, status
    assert "▶ running" not in status, status  # the line does not contradict the banner
    assert served.posts() == 0  # no worker ever sent a request


def clock_s(status: str) -> int:
    """The run time the status line shows ("MM:SS" or "H:MM:SS"), in whole seconds."""
    found = re.search(r"(?:(\d+):)?(\d\d):(\d\d)\b", status)
    assert found, status
    hours, minutes, seconds = (int(g or 0) for g in found.groups())
    return hours * 3600 + minutes * 60 + seconds


STOP_ROWS = [
    pytest.param("http_401", "the API key was rejected (HTTP 401", id="401"),
    pytest.param("http_404", "every request fails: HTTP 404", id="404"),
]


@pytest.mark.parametrize(("served", "reason"), STOP_ROWS, indirect=["served"])
async def test_a_configuration_error_says_so_and_stops_every_request(
    served: Served, engine: EngineHandle, make_app: MakeApp, reason: str
) -> None:
    """A wrong key (or a wrong URL or model): the banner says so and what to check; nothing more reaches the
    server once it is up, even after a key asks for more users. And after the halt the line says "■ stopped",
    so its run time stays where the engine stopped instead of counting on (it did: 00:02, then 00:04 two
    seconds later)."""
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        text, took_s = await until(app, pilot, "banner", lambda t: "engine stopped" in t, STARTED_WITHIN_S)
        banner, stopped = pane(app, text, "#fatal"), clock_s(pane(app, text, "#status"))
        await until(app, pilot, "an idle engine", lambda t: "in flight 0" in flat(t), 5.0)
        hits = served.posts()
        await pilot.press("plus", "right_square_bracket")  # more users: a key does not resume the load
        text = await watch(app, pilot, 2.2)  # past at least two second boundaries
        status, errors = pane(app, text, "#status"), pane(app, text, "#errors")
    assert clock_s(status) == stopped, (stopped, status)
    assert reason in banner and "check --" in banner, banner
    if "404" in reason:  # the banner names what was asked for, and which flags to check
        assert f"{served.url}/chat/completions" in banner and "model fault-model" in banner, banner
        assert "check --url, --api, --endpoint and --model" in banner, banner
    assert took_s < STARTED_WITHIN_S
    assert served.posts() == hits and 3 <= hits <= 3 + 2 * USERS, (hits, served.posts())
    assert "■ stopped" in status and "concurrency 6" in status, status
    assert count(r"(\d+) http_4xx", errors) == hits, errors
    assert SECRET[:12] not in text  # the key is never on screen


# --- failing requests: counted, and backed off ------------------------------------------------------

BACKOFF_ROWS = [
    # (row, error class, most requests per user in the window); a 404 stops the load (above)
    pytest.param("http_429", "http_429", 4, id="429-retry-after"),  # Retry-After 1: one a second
    pytest.param("http_500", "http_5xx", 12, id="5xx"),
]
WINDOW_S = 1.5
"""How long a back-off row watches the server after the first failures are on screen."""


@pytest.mark.parametrize(("served", "error_class", "per_user"), BACKOFF_ROWS, indirect=["served"])
async def test_failing_requests_are_counted_and_backed_off(
    served: Served,
    engine: EngineHandle,
    make_app: MakeApp,
    error_class: str,
    per_user: int,
) -> None:
    """Every request fails the same way: counted under its class, named with its status, and sent at a
    bounded rate (with no back-off each user would send hundreds a second)."""
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        text, took_s = await until(
            app, pilot, error_class, lambda t: shown(app, t, error_class) >= 2, STARTED_WITHIN_S
        )
        before = served.posts()
        text = await watch(app, pilot, WINDOW_S)
        sent = served.posts() - before
        errors, status, fatal = (
            pane(app, text, "#errors"),
            pane(app, text, "#status"),
            pane(app, text, "#fatal"),
        )
        on_screen = shown(app, text, error_class)
    assert took_s < STARTED_WITHIN_S
    assert 1 <= sent <= USERS * per_user, sent  # still issuing, but backed off
    assert 0 < on_screen <= served.posts() and f"failed {on_screen}" in status, (on_screen, status)
    assert f"errors · {on_screen}" in errors
    code = error_class.removeprefix("http_").replace("xx", "")
    assert f"HTTP {code}" in errors, errors  # the newest message, with its status
    assert fatal == "" and "▶ running" in status, (fatal, status)


# --- a fault in some streams: named, and the run goes on -------------------------------------------

STREAM_ROWS = [
    pytest.param(
        "disconnect",
        "disconnect",
        "disconnect: server closed the stream after 2 chunks (incomplete chunked body)",
        id="disconnect",
    ),
    pytest.param("stall", "stall", "stream stalled after 2 chunks", id="stall"),
    pytest.param("stream_error", "stream_error", "stream error: engine died", id="stream-error"),
    pytest.param("not_sse", "not_sse", "expected an event stream, got a non-streamed", id="not-sse"),
    pytest.param("oversized", "oversized", "oversized stream", id="oversized"),
]


@pytest.mark.parametrize(("served", "error_class", "message"), STREAM_ROWS, indirect=["served"])
async def test_a_fault_in_some_streams_is_named_and_the_run_goes_on(
    served: Served, engine: EngineHandle, make_app: MakeApp, error_class: str, message: str
) -> None:
    """Every other request goes wrong: each is counted under its class with its message, soon after the
    server did it, while the other requests keep completing and no banner stops the run."""
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        _, took_s = await until(
            app, pilot, error_class, lambda t: shown(app, t, error_class) >= 1, STARTED_WITHIN_S + TIMEOUT_S
        )
        lag_s = time.monotonic() - served.faulted_at[0]
        text, _ = await until(app, pilot, "completions", lambda t: done(t) >= 3, 10.0)
        errors, status = pane(app, text, "#errors", inside=True), pane(app, text, "#status")
        fatal = pane(app, text, "#fatal")
    assert took_s < STARTED_WITHIN_S + TIMEOUT_S
    assert lag_s < SHOWN_WITHIN_S + (TIMEOUT_S if error_class == "stall" else 0.0), lag_s
    assert message in errors, errors
    assert fatal == "" and "▶ running" in status, (fatal, status)
    classes = re.findall(r"\d+ ([a-z_0-9]+)", errors.split("last:")[0])
    # named once, under its own class; a good request past its 3 s timeout on a loaded machine (seen once in
    # CI's first pass, both cores busy) is not a misnamed fault
    assert set(classes) - {"timeout"} == {error_class}, errors


@pytest.mark.parametrize("served", ["malformed"], indirect=True)
async def test_a_malformed_line_is_skipped_and_its_stream_kept(
    served: Served, engine: EngineHandle, make_app: MakeApp
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        text, _ = await until(app, pilot, "completions", lambda t: done(t) >= 4, STARTED_WITHIN_S)
        errors = pane(app, text, "#errors", inside=True)
    assert len(served.faulted_at) >= 2  # half the streams carried a malformed line
    assert errors.startswith("no errors"), errors  # skipped lines are not failures
    assert re.search(r"\d+ malformed lines? skipped \(streams went on\)", errors), errors


FIXED_OSL_ROWS = [
    pytest.param("fixed_osl_400", id="at-once"),
    pytest.param("fixed_osl_400_late", id="after-the-first-batch"),
    pytest.param("fixed_osl_400_together", id="both-in-flight"),
]


@pytest.mark.parametrize("served", FIXED_OSL_ROWS, indirect=True)
async def test_a_rejected_fixed_osl_field_is_dropped_with_a_notice(
    served: Served, engine: EngineHandle, make_app: MakeApp
) -> None:
    """HTTP 400 naming ignore_eos: the request is sent again without it, so nothing fails of it; one notice
    says output lengths may now vary."""
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        text, _ = await until(app, pilot, "completions", lambda t: done(t) >= 3, STARTED_WITHIN_S)
        errors, status = pane(app, text, "#errors", inside=True), pane(app, text, "#status")
    notice = (
        "server rejected ignore_eos/min_tokens (HTTP 400); sending without them, so output lengths may vary"
    )
    assert "▶ running" in status, status
    # a request this test's server thread left silent past the 3 s timeout on a loaded machine (a stall, "no
    # data for 2.8 s", seen beside two busy loops) failed of the load, not of the field: no 400 is a failure
    classes = re.findall(r"\d+ ([a-z_0-9]+)", errors.split("last:")[0])
    assert set(classes) <= {"timeout", "stall"}, (status, errors)
    if not classes:
        assert "failed 0" in status and errors.startswith(f"no errors last: {notice}"), (status, errors)
    assert notice in errors and errors.count("ignore_eos") == 1, errors  # once, however many were rejected


def test_a_notice_is_told_apart_from_the_failures() -> None:
    """The pane's content itself: a notice takes the warning colour, a failure's message the error one."""
    failure = "#7 http_5xx: HTTP 500: boom"
    snap = replace(
        frozen.snapshot(),
        errors=(("http_5xx", 1),),
        recent_errors=("a notice", failure),
        notices=("a notice",),
    )
    content = errors_content(snap)
    styles = {content.plain[span.start : span.end]: span.style for span in content.spans}
    assert styles["a notice"] == "$text-warning" and styles[failure] == "$text-error", styles
    only = errors_content(replace(snap, errors=(), recent_errors=("a notice",)))
    assert only.plain == "no errors\nlast:\na notice"
