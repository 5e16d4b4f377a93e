"""The server-metrics poller against real servers on 127.0.0.1: the simulator under load (its state log is
the truth the scraped averages are held to), and small test servers for the missing-metrics paths."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

import httpx
import orjson
import pytest

from tests.support.sim_client import call, chat_body
from tui.engine.server_metrics import ServerMetricsPoller, ServerView
from tui.engine.server_metrics.kinds import VLLM
from tui.engine.server_metrics.view import MISSING, OK, UNREACHABLE
from tui.engine.server_metrics.window import time_weighted_mean
from tui.sim.launch import SimServer


def truth_mean(state_log: Path, key: str, t_from_ns: int, t_to_ns: int) -> float:
    """The exact time-average of `key` over the window from the simulator's state changes (computed here,
    not with the code under test)."""
    states = [orjson.loads(line) for line in state_log.read_bytes().splitlines()]
    area = 0.0
    for cur, nxt in zip(states, [*states[1:], None], strict=True):
        start = max(cur["t_ns"], t_from_ns)
        end = min(nxt["t_ns"] if nxt else t_to_ns, t_to_ns)
        if end > start:
            area += cur[key] * (end - start)
    return area / (t_to_ns - t_from_ns)


async def closed_loop(port: int, users: int, until: float, osl: int) -> int:
    """`users` clients each sending one streaming request after another until `until` (monotonic)."""
    done = 0

    async def user() -> None:
        nonlocal done
        while time.monotonic() < until:
            reply = await call(port, "POST", "/v1/chat/completions", chat_body(osl, words=10))
            assert reply.status == 200 and reply.done
            done += 1

    await asyncio.gather(*(user() for _ in range(users)))
    return done


async def test_scraped_running_and_waiting_match_the_simulators_record(tmp_path: Path) -> None:
    """Two levels on tiny-cpu (4 slots): 2 users, then 8. Per level, the poller's time-averaged running and
    waiting are within 1 of the simulator's own record; above the slots, waiting > 0 and TTFT rises."""
    state_log = tmp_path / "state.jsonl"
    level_s, settle_s = 2.0, 0.4
    with SimServer("tiny-cpu", time_scale=10, state_log=state_log) as sim:
        poller = ServerMetricsPoller(sim.url, interval_s=0.1, timeout_s=1.0, window_s=1.0)
        with poller:
            levels: list[tuple[int, int, int]] = []
            for users in (2, 8):
                t_start = time.monotonic()
                load = asyncio.ensure_future(closed_loop(sim.port, users, t_start + level_s, osl=20))
                await asyncio.sleep(settle_s)  # the load's own pacing: the level's warm-up
                t_from_ns = time.perf_counter_ns()
                await asyncio.sleep(level_s - settle_s - 0.2)
                t_to_ns = time.perf_counter_ns()
                assert await load > 0
                levels.append((users, t_from_ns, t_to_ns))
            view = poller.latest()
    assert view.status == OK and view.kind == VLLM and view.model == "sim-gemma-3-270m"
    summaries = {}
    for users, t_from_ns, t_to_ns in levels:
        got = view.level_summary(t_from_ns, t_to_ns)
        assert got["scrapes"] >= 5, got
        for key in ("running", "waiting"):
            truth = truth_mean(state_log, key, t_from_ns, t_to_ns)
            assert abs(got[f"{key}_mean"] - truth) <= 1.0, (users, key, got[f"{key}_mean"], truth)
            # from the running areas the poller keeps: the point-by-point mean of its own readings
            assert all(key in r.areas for r in view.readings)
            points = [(r.t_ns, r.gauges[key]) for r in view.readings]
            assert got[f"{key}_mean"] == pytest.approx(
                time_weighted_mean(points, t_from_ns, t_to_ns), rel=1e-9
            )
        summaries[users] = got
    low, high = summaries[2], summaries[8]
    # 8 users on 4 slots: near 4 running (2.9 once, the first run on a cold machine, the load still ramping)
    assert low["running_mean"] <= 2.0 + 1e-9 and high["running_mean"] > 2.5
    # 2 users on 4 slots wait only for a step (or a prefill) to start: 0.57 read once in a CI pass at -n 2,
    # where both users' requests came in step; 8 users keep ~4 waiting
    assert high["waiting_mean"] > 1.0 and low["waiting_mean"] < 1.0
    assert high["ttft_ms"]["mean"] > low["ttft_ms"]["mean"]  # the queue shows up in the server's TTFT
    assert high["generation_tok_s"] > low["generation_tok_s"] > 0
    assert high["kv_usage_mean"] > 0


# --- missing metrics ----------------------------------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    """/metrics answers as the test server's `metrics` says; /v1/models names the owner."""

    server: _TestServer

    def do_GET(self) -> None:
        srv = self.server
        if self.path == "/v1/models":
            body = orjson.dumps({"object": "list", "data": [{"id": "m", "owned_by": srv.owner}]})
            self._send(200, body, "application/json")
            return
        with srv.lock:
            srv.hits.append(time.monotonic())
            srv.active += 1
            srv.max_active = max(srv.max_active, srv.active)
        try:
            if srv.delay_s:
                time.sleep(srv.delay_s)  # the slow server being simulated
            if srv.hold is not None:
                srv.hold.wait(10.0)  # a slow server the test lets answer when it wants
            self._send(srv.status, srv.body, "text/plain")
        finally:
            with srv.lock:
                srv.active -= 1
            if len(srv.hits) >= srv.want_hits:
                srv.enough.set()

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _TestServer(http.server.ThreadingHTTPServer):
    def __init__(self, status: int, body: bytes, owner: str, delay_s: float, want_hits: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status, self.body, self.owner, self.delay_s = status, body, owner, delay_s
        self.want_hits = want_hits
        self.hits: list[float] = []
        self.active = self.max_active = 0
        self.lock = threading.Lock()
        self.enough = threading.Event()
        self.hold: threading.Event | None = None

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the timeout test's client leaves before the slow answer: a broken pipe is the point

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextmanager
def metrics_server(
    status: int, body: bytes, *, owner: str = "someone", delay_s: float = 0.0, want_hits: int = 4
) -> Iterator[_TestServer]:
    server = _TestServer(status, body, owner, delay_s, want_hits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5.0)


class _Notices:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.first = threading.Event()

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        self.first.set()


async def test_a_404_gives_one_line_with_the_hint_and_the_sim_goes_on() -> None:
    notices = _Notices()
    with SimServer("tiny-cpu", time_scale=10, metrics=False) as sim:
        poller = ServerMetricsPoller(sim.url, interval_s=0.05, on_notice=notices)
        with poller:
            assert notices.first.wait(5.0)
            reply = await call(sim.port, "POST", "/v1/chat/completions", chat_body(4))
            assert reply.status == 200 and reply.done  # the load is untouched
            view = poller.latest()
    assert len(notices.lines) == 1
    (line,) = notices.lines
    assert "\n" not in line and "answered 404" in line and "--metrics-url" in line, line
    assert view.status == MISSING and view.message == line
    assert view.level_summary(0, time.perf_counter_ns())["running_mean"] is None


def test_llama_server_without_metrics_gets_its_hint_and_the_poller_backs_off() -> None:
    """llama-server started without --metrics answers 501; the poller says so once and slows down."""
    notices = _Notices()
    with metrics_server(501, b'{"error": "start with --metrics"}', owner="llamacpp", want_hits=4) as srv:
        with ServerMetricsPoller(srv.base_url, interval_s=0.05, max_backoff_s=1.0, on_notice=notices):
            assert srv.enough.wait(10.0)
        hits = list(srv.hits)
    assert len(notices.lines) == 1 and "llama-server: start with --metrics" in notices.lines[0]
    gaps = [b - a for a, b in pairwise(hits)]
    # each wait doubles (0.1, 0.2, 0.4 s) after the last answer: a busy machine can only lengthen a gap, so
    # each is held to at least its own step (without the back-off they read 0.05 s)
    steps = [min(0.05 * 2 ** (i + 1), 1.0) for i in range(len(gaps))]
    assert all(gap >= 0.9 * step for gap, step in zip(gaps, steps, strict=True)), (gaps, steps)


def test_a_body_that_is_not_prometheus_text_is_missing_metrics() -> None:
    notices = _Notices()
    html = b"<html><body>a dashboard</body></html>"
    with metrics_server(200, html, owner="sglang", want_hits=1) as srv:
        poller = ServerMetricsPoller(srv.base_url, interval_s=0.05, on_notice=notices)
        with poller:
            assert notices.first.wait(5.0)
            view: ServerView = poller.latest()
    assert view.status == MISSING
    assert (
        "not Prometheus text" in notices.lines[0]
        and "SGLang: start with --enable-metrics" in notices.lines[0]
    )


def test_scrapes_never_overlap_on_a_slow_server_and_a_timeout_is_unreachable() -> None:
    body = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"
    with metrics_server(200, body, delay_s=0.15, want_hits=4) as srv:
        with ServerMetricsPoller(srv.base_url, interval_s=0.05, timeout_s=2.0) as poller:
            assert srv.enough.wait(10.0)
            view = poller.latest()
        assert srv.max_active == 1
    assert view.status == OK and view.current["running"] == 3.0
    notices = _Notices()
    with metrics_server(200, body, delay_s=1.0, want_hits=1) as srv:
        poller = ServerMetricsPoller(srv.base_url, interval_s=0.05, timeout_s=0.2, on_notice=notices)
        with poller:
            assert notices.first.wait(5.0)
            view = poller.latest()
    assert view.status == UNREACHABLE and "ReadTimeout" in notices.lines[0]


def _until(pred: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.01)
    assert pred(), "timed out"  # type: ignore[operator]


def test_a_slow_metrics_is_late_not_gone_its_timeout_grows_and_its_figures_are_marked_stale() -> None:
    """A /metrics that starts answering in seconds after answering at once: the scrape that times out is
    late, not "the server stopped answering"; the next one waits twice as long and is read, marked stale;
    one notice; fresh again once it is fast."""
    from tui.app.widgets.server_pane import server_content
    from tui.engine.results.collect import server_summary

    body = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"
    notices = _Notices()
    with metrics_server(200, body, want_hits=1) as srv:
        poller = ServerMetricsPoller(
            srv.base_url, interval_s=0.05, timeout_s=0.3, late_s=0.2, on_notice=notices
        )
        with poller:
            _until(lambda: poller.latest().scrapes >= 2)
            assert poller.latest().stale_s is None and poller.latest().late == 0
            srv.delay_s = 0.35  # past the timeout, well within twice it
            _until(lambda: poller.latest().stale_s is not None and poller.latest().scrapes >= 3)
            view = poller.latest()
            assert view.status == OK and view.current["running"] == 3.0  # read, not given up
            assert (
                poller.scrape_timeout_s == pytest.approx(0.6) and view.late >= 2
            )  # the timeout, the late one
            assert view.stale_s >= 0.35  # type: ignore[operator]
            assert "late: /metrics slow, figures up to 0." in server_content(view, None).plain
            assert server_summary(view, {}).run["late_scrapes"] == view.late  # the results say it too
            # and each level its own: all of them in a window over the run, none before the slowness
            assert view.level_summary(0, time.perf_counter_ns())["late_scrapes"] == view.late
            assert "late_scrapes" not in view.level_summary(0, view.readings[0].t_ns)
            srv.delay_s = 0.0
            _until(lambda: poller.latest().stale_s is None)
    assert len(notices.lines) == 1, notices.lines  # said once, not per scrape
    assert "gave no answer in 0.3 s: /metrics is slow; the next scrapes wait up to 0.6 s" in notices.lines[0]
    assert not any("stopped answering" in line for line in notices.lines)


def test_stop_does_not_wait_on_a_slow_scrape_and_drops_its_answer() -> None:
    """A scrape in flight when the face stops (a /metrics answering in seconds) is not waited for: stop
    returns at once and the scrape's late answer is neither published nor passed on (a session closed by
    then). Before, stop joined the thread for up to 5 s."""
    body = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"
    scraped: list[int] = []
    with metrics_server(200, body, want_hits=1) as srv:
        poller = ServerMetricsPoller(
            srv.base_url, interval_s=0.05, timeout_s=8.0, on_scrape=lambda t, text, gpu: scraped.append(t)
        ).start()
        _until(lambda: poller.latest().scrapes >= 1)
        srv.hold = threading.Event()
        _until(lambda: srv.active == 1)  # the next scrape is in flight, held by the server
        thread = poller._thread
        assert thread is not None
        seen, calls = poller.latest(), len(scraped)
        started = time.monotonic()
        poller.stop()
        took_s = time.monotonic() - started
        srv.hold.set()  # the answer comes now, after stop
        thread.join(5.0)
    # its 0.2 s wait (0.200-0.208 s in 6 runs at load 11 on 2 cores); before, the 5 s join (held longer)
    assert took_s < 1.5, took_s
    assert not thread.is_alive()
    assert poller.latest() is seen and len(scraped) == calls  # the late answer went nowhere


def test_a_server_that_refuses_connections_gets_advice_about_the_server_not_its_metrics() -> None:
    """Nothing listening: "connection refused" and whether the server is up, not a metrics flag or a proxy;
    the same once a vLLM whose /metrics answered goes away (its kind's hint assumes something answers)."""
    notices = _Notices()
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with ServerMetricsPoller(f"http://127.0.0.1:{port}/v1", interval_s=0.05, on_notice=notices) as poller:
        assert notices.first.wait(5.0)
        view = poller.latest()
    line = notices.lines[0]
    assert view.status == UNREACHABLE and view.message == line  # the line the server pane shows
    assert "connection refused" in line and "is the server up" in line, line
    assert "--metrics-url" not in line and "Prometheus" not in line, line
    notices = _Notices()
    body = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"
    with metrics_server(200, body, want_hits=2) as srv:
        poller = ServerMetricsPoller(srv.base_url, interval_s=0.05, on_notice=notices).start()
        assert srv.enough.wait(5.0)  # scraped twice: the first scrape's vLLM is known
    try:  # the server is gone now: the next scrapes fail (reset while it closed, then refused)
        assert notices.first.wait(5.0)
        deadline = time.monotonic() + 5.0
        while "connection refused" not in (message := poller.latest().message or ""):
            assert time.monotonic() < deadline, message
            time.sleep(0.02)
        view = poller.latest()
    finally:
        poller.stop()
    assert view.kind == VLLM and view.status == UNREACHABLE
    for line in (notices.lines[0], message):  # it answered before: the server went away, no proxy is blamed
        assert "the server stopped answering" in line and "proxy" not in line, line


def test_a_key_echoed_in_a_metrics_body_is_never_shown() -> None:
    """A /metrics that answers with an error page quoting the key: the one-line message masks it whole."""
    key = "sk-echo-" + "k" * 120
    body = f'{{"error": "Incorrect API key provided: {key}"}}'
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text=body))
    poller = ServerMetricsPoller(
        "http://127.0.0.1:9/v1", headers={"authorization": f"Bearer {key}"}, transport=transport
    )
    with httpx.Client(transport=transport) as client:
        assert poller.scrape_once(client) is False
    message = poller.latest().message or ""
    assert message and "sk-echo-k" not in message and key[:12] not in message
