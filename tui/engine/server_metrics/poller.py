"""Poll the server's `/metrics` from a thread in the face process; publish an immutable `ServerView`.

Never in an engine worker (its event loop stamps tokens) and never on the UI's loop (drawing would delay the
scrape, and a slow scrape would stall drawing): a daemon thread with its own blocking httpx client. Each
scrape is bounded by `timeout_s`; the next starts on the next tick of a fixed grid after the last one
finished, so scrapes never overlap and late ticks are skipped, not bunched (Textual's timers do the same).
A face calls `latest()`, which returns the last published view: one attribute read, no lock, no I/O.

When `/metrics` is missing (an HTTP error, or a body that is not Prometheus text) or unreachable, the view
says so in one line with the hint that fits the server (its kind guessed from `/v1/models`' `owned_by`),
`on_notice` is called with that line once, and the poller backs off (doubling up to `max_backoff_s`) rather
than hammering a server that has no metrics; it resumes the normal pace as soon as a scrape succeeds.

A `/metrics` that answers in seconds (a busy server renders it on its own event loop) is late, not gone:
a scrape longer than `late_s` is published with `stale_s` set (its figures are as of some instant within
that time) and counted in `late`, said once; a scrape that times out doubles the next one's timeout (up to
`MAX_TIMEOUT_S`), so a slow `/metrics` is still read. The load never waits on it: the poller is its own
thread in the face's process.

    poller = ServerMetricsPoller("http://127.0.0.1:8000/v1").start()
    view = poller.latest()      # ServerView: view.current["running"], view.level_summary(t0_ns, t1_ns)
    poller.stop()
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson

from tui.engine.config import EngineOptions, TargetConfig
from tui.engine.network import sync_transport
from tui.engine.redact import mask_secret
from tui.engine.server_metrics.gpu import FAMILIES
from tui.engine.server_metrics.gpu_source import GpuSource, gpu_source_for
from tui.engine.server_metrics.kinds import LLAMACPP, MAPS, UNKNOWN, detect_kind, hint_for, kind_from_owner
from tui.engine.server_metrics.parse import NotPrometheusError, parse_text, sample_names
from tui.engine.server_metrics.parts import estimate_record
from tui.engine.server_metrics.slots import Slots, parse_slots, slots_url
from tui.engine.server_metrics.view import (
    MISSING,
    PROCESS_START,
    UNREACHABLE,
    Hold,
    Reading,
    ServerView,
    build_view,
    model_of,
    read,
    restarted,
    with_areas,
)

MAX_TIMEOUT_S = 8.0
"""The longest a scrape's timeout grows to after timeouts."""
STOP_WAIT_S = 0.2
"""How long `stop` waits for the thread: between scrapes it ends at once; a scrape in flight is dropped
(its answer neither published nor passed on) and its daemon thread ends at that scrape's timeout."""
LATE = "late"
"""The notice key of a slow /metrics."""


def metrics_url_for(base_url: str) -> str:
    """`http://host:port/v1` -> `http://host:port/metrics`: the path beside `/v1`, as vLLM, SGLang,
    llama-server and TGI serve it. A base without `/v1` gets `/metrics` appended to its path."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path + "/metrics", "", ""))


def _models_url(metrics_url: str) -> str:
    parts = urlsplit(metrics_url)
    path = parts.path
    path = path[: -len("/metrics")] if path.endswith("/metrics") else path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, path + "/v1/models", "", ""))


class ServerMetricsPoller:
    """A background thread scraping one `/metrics` URL every `interval_s`; `latest()` is the view."""

    def __init__(
        self,
        base_url: str,
        *,
        metrics_url: str | None = None,
        interval_s: float = 1.0,
        timeout_s: float = 2.0,
        window_s: float = 10.0,
        history: int = 600,
        max_backoff_s: float = 30.0,
        headers: Mapping[str, str] | None = None,
        on_notice: Callable[[str], None] | None = None,
        transport: httpx.BaseTransport | None = None,
        log: IO[bytes] | None = None,
        gpu: GpuSource | None = None,
        on_scrape: Callable[[int, str, Mapping[str, float]], None] | None = None,
        late_s: float = 1.0,
    ) -> None:
        """`base_url`: the OpenAI base (`.../v1`); `metrics_url` overrides where to scrape. `window_s`: the
        live view's window for rates and quantiles. `history`: readings kept (600 at 1 Hz = 10 minutes).
        `headers`: sent with every scrape (an Authorization header for a hosted server). `on_notice`: called
        once with the one-line reason when metrics are missing or unreachable. `log`: an open binary file that
        gets one JSON line per scrape (`scrape_record`), flushed, for plots after the run; on a write error
        the poller says so once (`on_notice`) and stops logging, the scraping goes on. `gpu`: where the
        GPU figures come from besides the server's own text (`gpu_source.GpuSource`), read each scrape."""
        if interval_s <= 0 or timeout_s <= 0 or window_s <= 0 or history < 2:
            raise ValueError("interval_s, timeout_s and window_s must be positive; history at least 2")
        self.url = metrics_url or metrics_url_for(base_url)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.scrape_timeout_s = timeout_s
        """The next scrape's timeout: `timeout_s`, doubled after each timeout up to `MAX_TIMEOUT_S`."""
        self.late_s = late_s
        self._timed_out_late = False
        """The last scrape timed out after the server had answered (late, not gone)."""
        self.max_backoff_s = max(max_backoff_s, interval_s)
        self._headers = dict(headers or {})
        self._on_notice = on_notice
        self._transport = transport
        self._log = log
        self._gpu = gpu
        self._on_scrape = on_scrape
        """Called with each good scrape's time, body and GPU gauges (a session records them)."""
        self._slots_on = True
        self._ring: deque[Reading] = deque(maxlen=history)
        self._holds: dict[str, Hold] = {}
        """Each gauge's latest reading and running area (`with_areas`), carried from scrape to scrape."""
        self._view = ServerView(url=self.url, window_s=window_s)
        self._noticed: set[str] = set()
        self._kind_guess: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.scrape_s_max = 0.0
        """The slowest scrape so far (request + parse + view), seconds: the poller's own cost."""

    # -- the face's side --

    def latest(self) -> ServerView:
        """The last published view (immutable; safe to read from any thread)."""
        return self._view

    def start(self) -> ServerMetricsPoller:
        """Start the thread (idempotent); the first scrape is immediate."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tokentop-server-metrics", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = STOP_WAIT_S) -> None:
        """Stop the thread, waiting at most ``timeout_s`` for it: a slow /metrics (seconds, up to
        `MAX_TIMEOUT_S`) never holds up a face's exit; from now on nothing is published or called back."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def __enter__(self) -> ServerMetricsPoller:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the thread --

    def _run(self) -> None:
        timeout = httpx.Timeout(self.timeout_s)
        with httpx.Client(timeout=timeout, headers=self._headers, transport=self._transport) as client:
            backoff_s = self.interval_s
            grid_t0 = time.monotonic()
            delay_s = 0.0
            while not self._stop.wait(delay_s):
                started = time.monotonic()
                ok = self.scrape_once(client)
                now = time.monotonic()
                self.scrape_s_max = max(self.scrape_s_max, now - started)
                if ok:
                    backoff_s = self.interval_s
                    # The next tick of the grid after now: a slow scrape skips ticks instead of bunching.
                    ticks = int((now - grid_t0) / self.interval_s) + 1
                    delay_s = grid_t0 + ticks * self.interval_s - now
                elif self._gone() or self._timed_out_late:
                    # a server that answered before and now refuses is most likely restarting: the first
                    # scrape after it must come before its counters climb back past the old ones, or the
                    # restart goes unseen (and a refused connection costs the server nothing); a late one
                    # is asked again at the usual pace (its own timeout spaces the attempts)
                    backoff_s = delay_s = self.interval_s
                else:
                    backoff_s = min(backoff_s * 2, self.max_backoff_s)
                    delay_s = backoff_s
                    grid_t0 = now + delay_s  # a fresh grid once the server answers again

    def scrape_once(self, client: httpx.Client) -> bool:
        """One scrape: request, parse, publish. True when it produced a reading. Never raises."""
        sent_ns = time.perf_counter_ns()
        self._timed_out_late = False
        try:
            response = client.get(self.url, timeout=self.scrape_timeout_s)
            got_ns = time.perf_counter_ns()
            if self._stop.is_set():  # stopped while it was in flight: its answer is dropped
                return False
            if response.status_code != 200:
                self._fail(client, MISSING, f"GET {self.url} answered {response.status_code}")
                return False
            text = response.text
            kind, families = self._parse(text)
        except Exception as exc:  # a parser surprise too must not end the thread: the view says what happened
            if not self._stop.is_set():  # after `stop`, a scrape in flight is dropped
                self._failed(client, exc)
            return False
        # Midway between send and receipt: the instant the server most likely read its state.
        t_ns = (sent_ns + got_ns) // 2
        gpu = self._gpu.read(client) if self._gpu is not None else {}
        if self._on_scrape is not None:
            self._on_scrape(t_ns, text, gpu)
        self._publish(kind, families, t_ns, gpu)
        took_s = (got_ns - sent_ns) / 1e9
        if took_s > self.late_s:
            self._late(took_s, t_ns)
        if kind == LLAMACPP:
            self._view = replace(self._view, slots=self._read_slots(client))
        self._write_log(self._view, t_ns)
        return True

    def _failed(self, client: httpx.Client, exc: Exception) -> None:
        """A scrape that produced no reading: what it ran into, said and published."""
        if isinstance(exc, NotPrometheusError):
            self._fail(client, MISSING, f"GET {self.url}: {exc}")
        elif isinstance(exc, httpx.TimeoutException):
            self._timed_out(client, exc)
        elif isinstance(exc, httpx.HTTPError):
            what, hint = unreachable(exc)
            self._fail(client, UNREACHABLE, f"GET {self.url} failed ({what})", hint=hint)
        else:
            self._fail(client, MISSING, f"GET {self.url}: unreadable ({type(exc).__name__}: {exc})")

    def _late(self, took_s: float, t_ns: int) -> None:
        """The scrape just published (of ``t_ns``) took ``took_s``: its figures are of some instant in it."""
        self._view = replace(
            self._view, late=self._view.late + 1, stale_s=took_s, late_at_ns=self._late_at(t_ns)
        )
        self._say(
            LATE,
            f"server metrics: GET {self.url} took {took_s:.1f} s: scrapes are late, their figures up to "
            "that old (the load's timing is untouched)",
        )

    def _timed_out(self, client: httpx.Client, exc: httpx.TimeoutException) -> None:
        """No answer within the scrape's timeout: the next one waits twice as long (a /metrics that answers
        in seconds is still read). After the server had answered, it is late, not gone."""
        waited_s = self.scrape_timeout_s
        self.scrape_timeout_s = min(max(self.timeout_s, MAX_TIMEOUT_S), waited_s * 2)
        if self._view.scrapes == 0:
            what, hint = unreachable(exc)
            self._fail(client, UNREACHABLE, f"GET {self.url} failed ({what})", hint=hint)
            return
        self._timed_out_late = True
        self._write_log_failure(LATE, f"GET {self.url}: no answer in {waited_s:.1f} s")
        old = self._view
        age_s = (time.perf_counter_ns() - old.readings[-1].t_ns) / 1e9 if old.readings else None
        late_at_ns = self._late_at(time.perf_counter_ns())
        self._view = replace(
            old, late=old.late + 1, stale_s=age_s, failures=old.failures + 1, late_at_ns=late_at_ns
        )
        self._say(
            LATE,
            f"server metrics: GET {self.url} gave no answer in {waited_s:.1f} s: /metrics is slow; the "
            f"next scrapes wait up to {self.scrape_timeout_s:.1f} s (the load's timing is untouched)",
        )

    def _late_at(self, t_ns: int) -> tuple[int, ...]:
        """The late scrapes' times with one more, as many kept as the ring holds readings."""
        return (*self._view.late_at_ns, t_ns)[-(self._ring.maxlen or 1) :]

    def _say(self, key: str, message: str) -> None:
        """``on_notice`` once per ``key``, the key masked out."""
        for value in self._headers.values():
            message = mask_secret(message, value.removeprefix("Bearer "))
        if key not in self._noticed:
            self._noticed.add(key)
            if self._on_notice is not None:
                self._on_notice(message)

    @staticmethod
    def _parse(text: str) -> tuple[str, Any]:
        kind = detect_kind(list(sample_names(text)))
        server_map = MAPS.get(kind)
        wanted = server_map.families() | FAMILIES | {PROCESS_START} if server_map is not None else None
        return kind, parse_text(text, wanted)

    def take(self, t_ns: int, text: str, gpu: Mapping[str, float] | None = None) -> None:
        """Publish the view of a ``/metrics`` body scraped at ``t_ns`` by someone else (a session's replay),
        with the GPU gauges read beside it: the same parse and view as a live scrape. A body that does not
        parse is skipped, as live."""
        try:
            kind, families = self._parse(text)
        except Exception:
            return
        self._publish(kind, families, t_ns, gpu or {})

    def _publish(self, kind: str, families: Any, t_ns: int, gpu: Mapping[str, float]) -> None:
        base = self._view
        if kind != base.kind:
            self._ring.clear()  # another server answers now: its readings do not continue the old ones
            self._holds.clear()
            base = ServerView(url=self.url, window_s=base.window_s, kind=kind, scrapes=base.scrapes)
        reading = read(families, t_ns, kind)
        if gpu:
            reading = replace(reading, gauges=MappingProxyType({**reading.gauges, **gpu}))
        reading = with_areas(reading, self._holds)
        if self._ring and restarted(self._ring[-1], reading):
            base = replace(base, resets=base.resets + 1, reset_t_ns=t_ns)
        self._ring.append(reading)
        self._view = build_view(base, tuple(self._ring), model_of(families))

    def _read_slots(self, client: httpx.Client) -> Slots | None:
        """llama.cpp's `/slots` beside its scrape; not asked again once it answers other than 200
        (`--no-slots`)."""
        if not self._slots_on:
            return None
        try:
            response = client.get(slots_url(self.url))
            if response.status_code != 200:
                self._slots_on = False
                return None
            return parse_slots(response.json())
        except (httpx.HTTPError, ValueError):
            return None

    def _write_log(self, view: ServerView, t_ns: int) -> None:
        if self._log is None:
            return
        try:
            self._log.write(orjson.dumps(scrape_record(view, t_ns), option=orjson.OPT_APPEND_NEWLINE))
            self._log.flush()
        except (OSError, ValueError) as exc:
            self._log = None
            if self._on_notice is not None:
                self._on_notice(f"cannot write the server metrics log: {exc}; scraping goes on")

    def _fail(self, client: httpx.Client, status: str, what: str, *, hint: str | None = None) -> None:
        """``hint``: the advice when it is not about the server's kind (nothing answered at all)."""
        self._write_log_failure(status, what)
        kind = self._view.kind
        noticed = status
        if status == UNREACHABLE and self._view.scrapes > 0:
            noticed = "gone"  # it answered before: not a proxy or a missing flag, the server went away
            message = (
                f"server metrics: {what}: the server stopped answering; scraping goes on until it is back"
            )
        else:
            if hint is None:
                hint = hint_for(self._guess_kind(client) if kind == UNKNOWN else kind)
            message = f"server metrics: {what}; {hint} (the run goes on without them)"
        # the body snippet in `what` is the server's text: a key it echoes back must not be shown or saved
        for value in self._headers.values():
            message = mask_secret(message, value.removeprefix("Bearer "))
        old = self._view
        self._view = replace(
            old,
            status=status,
            url=self.url,
            kind=old.kind,
            model=old.model,
            message=message,
            window_s=old.window_s,
            scrapes=old.scrapes,
            failures=old.failures + 1,
            # what was measured before stays usable for level summaries; the live figures do not hold
            current={},
            quantiles={},
            estimates={},
            parts=None,
            other_gauges={},
            slots=None,
        )
        if noticed not in self._noticed:
            self._noticed.add(noticed)
            if self._on_notice is not None:
                self._on_notice(message)

    def _gone(self) -> bool:
        """The server answered scrapes before and now refuses them."""
        return self._view.status == UNREACHABLE and self._view.scrapes > 0

    def _write_log_failure(self, status: str, what: str) -> None:
        if self._log is not None:
            record = {"t_ns": time.perf_counter_ns(), "status": status, "error": what}
            try:
                self._log.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
                self._log.flush()
            except (OSError, ValueError):
                self._log = None

    def _guess_kind(self, client: httpx.Client) -> str:
        """The server kind from `/v1/models` (`owned_by`) and its `Server` header; asked once."""
        if self._kind_guess is None:
            self._kind_guess = UNKNOWN
            try:
                response = client.get(_models_url(self.url))
                owners = ""
                if response.status_code == 200:
                    data = response.json().get("data") or []
                    owners = " ".join(str(m.get("owned_by", "")) for m in data if isinstance(m, dict))
                self._kind_guess = kind_from_owner(owners, response.headers.get("server", ""))
            except (httpx.HTTPError, ValueError, AttributeError):
                pass
        return self._kind_guess


def unreachable(exc: httpx.HTTPError) -> tuple[str, str]:
    """What a scrape that got no answer ran into, and the advice for it: about the server's address and
    whether it is up, never its metrics flags (a kind's hint assumes something answered)."""
    name = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return name, "no answer in time: is the server overloaded, or a firewall dropping the connection?"
    if isinstance(exc, httpx.ConnectError) and "refused" in str(exc).lower():
        return (
            "connection refused",
            "nothing accepts connections there: is the server up, on this host and port?",
        )
    what = f"{name}: {exc}" if str(exc) else name
    return what, "is the server up, and is this its address (http or https, host, port)?"


def scrape_record(view: ServerView, t_ns: int) -> dict[str, Any]:
    """One line of ``--server-metrics-log``: when (``perf_counter_ns``, the engine's clock, so it joins the
    requests log), what server, and every common signal as the live view had it (rates and quantiles over
    the view's window; latencies in seconds, as the server exports them; a quantile is a number only where
    its bucket is narrow, `buckets` gives each one's edges and kind, `parts.histogram_record`)."""
    return {
        "t_ns": t_ns,
        "status": view.status,
        "kind": view.kind,
        "model": view.model,
        "window_s": view.window_s,
        "current": dict(view.current),
        "quantiles": {name: dict(q) for name, q in view.quantiles.items()},
        "buckets": {
            name: {p: estimate_record(est) for p, est in found.items()}
            for name, found in view.estimates.items()
        },
        "ttft_parts": view.parts,
        "resets": view.resets,
        "other_gauges": dict(view.other_gauges),
    }


def poller_for(
    target: TargetConfig,
    options: EngineOptions,
    *,
    on_notice: Callable[[str], None],
    log: IO[bytes] | None,
    history: int = 3600,
    on_scrape: Callable[[int, str, Mapping[str, float]], None] | None = None,
) -> ServerMetricsPoller:
    """The poller a face runs for ``target`` (not started): the engine options' URL and interval, the API
    key as a bearer token (hosted servers guard /metrics too), an hour of readings at 1 Hz by default."""
    headers = {"authorization": f"Bearer {target.api_key}"} if target.api_key else None
    gpu = gpu_source_for(options.gpu_metrics, on_notice) if options.gpu_metrics else None
    return ServerMetricsPoller(
        target.base_url,
        metrics_url=options.metrics_url,
        interval_s=options.metrics_interval_s,
        headers=headers,
        on_notice=on_notice,
        log=log,
        history=history,
        gpu=gpu,
        on_scrape=on_scrape,
        # the same trust (--ca-cert, --insecure, proxies) as the load, for the URL it scrapes
        transport=sync_transport(target, options.metrics_url),
    )
