"""tokentop's own telemetry, from one short bench against the simulator: its ``/metrics`` scraped while the
bench runs, its final figures checked against the level the results saved and the live feed's lines (with
the level's price), and its spans, received by a small OTLP/HTTP receiver, checked against the
``traceparent`` each request carried to the simulator."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import tui.bench.run as bench
from tests.support.ports import free_port
from tui.cli import build_parser
from tui.cli.bench import bench_config
from tui.engine.host.canary import CANARY_WORKER, max_in_flight
from tui.engine.host.handle import EngineHandle
from tui.engine.records import RequestRecord
from tui.engine.results.files import read_results
from tui.engine.results.model import Results
from tui.engine.server_metrics.view import CanaryFigures
from tui.engine.telemetry import otlp
from tui.engine.telemetry.endpoint import MetricsEndpoint
from tui.engine.telemetry.prometheus import SnapshotCollector
from tui.own_metrics import serve_engine
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)

OSL = 8
COST_PER_HOUR = 4.0
CANARY_RATE = 4.0
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
"""The simulator's GPU energy counter (mJ), as a DCGM exporter names it."""


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition, keyed by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@dataclass
class Run:
    status: int
    results: Results
    scrapes: list[Samples]
    """What the endpoint served while the bench ran, in order."""
    final: Samples
    """The collector's families over the engine's last snapshot (after the run)."""
    handle: EngineHandle
    spans: list[Span] = field(default_factory=list)
    """What the OTLP receiver was sent for the load's requests."""
    canary_spans: list[Span] = field(default_factory=list)
    """... and for the canary user's, apart."""
    seen: dict[str, str] = field(default_factory=dict)
    """The simulator's truth log: each client request id and the ``traceparent`` it came with."""
    feed: list[dict[str, Any]] = field(default_factory=list)
    """The ``--live-jsonl`` lines, in order."""
    saved: dict[str, Any] = field(default_factory=dict)
    """The results file as JSON."""
    energy_mj: float = 0.0
    """The simulator's GPU energy counter (mJ) as it served it after the run."""
    canary_served: Samples = field(default_factory=dict)
    """A scrape of the handle served as the faces serve it (`serve_engine`), after the run."""
    canary: CanaryFigures | None = None
    """The canary's figures in the engine's view at that scrape."""


class Scraper(threading.Thread):
    """Scrapes ``url`` every 50 ms until stopped; keeps each answer."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.scrapes: list[Samples] = []

    def run(self) -> None:
        with httpx.Client(timeout=2.0) as client:
            while not self.stop.wait(0.05):
                try:
                    self.scrapes.append(parse(client.get(self.url).text))
                except httpx.HTTPError:
                    continue  # not yet bound, or closed at the end


class Receiver(ThreadingHTTPServer):
    """A collector's OTLP/HTTP traces endpoint on 127.0.0.1: decodes each export and keeps its spans."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                request = ExportTraceServiceRequest.FromString(body)
                receiver.paths.append(self.path)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        receiver.spans.extend(scope.spans)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One bench: 2 users for 3 s, a TTFT SLO, tokentop's metrics on a free port, scraped throughout, its
    spans sent to a receiver, its live feed to a file, a price per hour, the server's metrics read (the
    simulated GPU's energy counter among them) and a canary user beside the load."""
    tmp = tmp_path_factory.mktemp("telemetry")
    made: list[EngineHandle] = []

    def factory(*args: Any, **kwargs: Any) -> EngineHandle:
        made.append(EngineHandle(*args, **kwargs))
        return made[-1]

    port = free_port()
    scraper = Scraper(f"http://127.0.0.1:{port}/metrics")
    receiver = Receiver()
    receiver.thread.start()
    truth = tmp / "truth.jsonl"
    with SimServer("small-gpu", time_scale=4.0, truth_log=truth) as sim:
        ns = build_parser().parse_args(
            ["bench", "--url", sim.url, "--concurrency", "2", "--duration", "3", "--osl", str(OSL),
             "--isl", "16", "--no-isl-probe", "--no-record", "--quiet",
             "--slo-ttft-ms", "1000", "--serve-metrics-port", str(port), "--otlp-endpoint", receiver.url,
             "--live-jsonl", str(tmp / "feed.jsonl"), "--cost-per-hour", str(COST_PER_HOUR),
             "--canary-rate", str(CANARY_RATE), "-o", str(tmp / "results.json")]
        )  # fmt: skip
        scraper.start()
        try:
            status = bench.run(bench_config(ns), engine_factory=factory)
        finally:
            scraper.stop.set()
            scraper.join(5)
            receiver.shutdown()
            receiver.server_close()
        served = httpx.get(sim.url.removesuffix("/v1") + "/metrics", timeout=5).text
    (energy_mj,) = [float(ln.rpartition(" ")[2]) for ln in served.splitlines() if ln.startswith(ENERGY + "{")]
    (handle,) = made
    results = read_results(tmp / "results.json")
    assert isinstance(results, Results)
    collector = SnapshotCollector()
    collector.source = handle.snapshot
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    final = parse(generate_latest(registry).decode())
    # the canary's figures as served after the run: the 10 s window moves on, so a scrape between two equal
    # views of it is theirs
    canary_scrape: tuple[Samples, CanaryFigures | None] = ({}, None)
    endpoint = MetricsEndpoint("127.0.0.1", 0)
    serve_engine(endpoint, handle)
    try:
        for _ in range(3):
            before = handle.server_view()
            scraped = parse(httpx.get(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=5).text)
            after = handle.server_view()
            if before is not None and after is not None and before.canary == after.canary:
                canary_scrape = (scraped, before.canary)
                break
    finally:
        endpoint.close()
    lines = [json.loads(line) for line in truth.read_text().splitlines()]
    seen = {t["client_request_id"]: t["traceparent"] for t in lines}
    assert set(receiver.paths) == {"/v1/traces"}
    feed = [json.loads(line) for line in (tmp / "feed.jsonl").read_text().splitlines()]
    saved = json.loads((tmp / "results.json").read_text())
    canary = [s for s in receiver.spans if "tokentop.canary" in _attrs(s)]
    load = [s for s in receiver.spans if "tokentop.canary" not in _attrs(s)]
    yield Run(status, results, scraper.scrapes, final, handle, load, canary, seen, feed, saved, energy_mj,
              *canary_scrape)  # fmt: skip


def test_the_endpoint_serves_the_client_view_while_the_bench_runs(run: Run) -> None:
    assert run.status == 0
    # a scrape before the engine is served has no families yet
    busy = [s for s in run.scrapes if s.get(("tokentop_requests_sent_total", ()), 0) > 0]
    assert busy, f"no scrape saw a request in {len(run.scrapes)} scrapes"
    assert any(value(s, "tokentop_target_users") == 2 for s in busy)
    completed = [value(s, "tokentop_requests_completed_total") for s in busy]
    assert completed == sorted(completed), "a counter went down"
    assert completed[-1] <= value(run.final, "tokentop_requests_completed_total")
    (info,) = [k for k in run.final if k[0] == "tokentop_info"]
    assert dict(info[1])["server"].startswith("http://127.0.0.1:")


def test_the_final_figures_are_the_saved_levels(run: Run) -> None:
    (level,) = run.results.levels
    totals = run.results.totals
    f = run.final
    assert value(f, "tokentop_requests_completed_total") == totals.completed == level.level_completed
    assert value(f, "tokentop_requests_sent_total") == totals.completed + totals.failed + totals.cancelled
    assert level.mean_output_tokens == OSL
    assert value(f, "tokentop_output_tokens_total") == OSL * totals.completed
    assert value(f, "tokentop_level_id") == level.level_id
    assert value(f, "tokentop_level_requests_completed") == level.completed
    assert level.slo is not None
    assert value(f, "tokentop_level_slo_attainment_ratio", bound="estimate") == level.slo.attainment
    assert value(f, "tokentop_level_slo_attainment_ratio", bound="low") == level.slo.attainment_low
    assert 0 <= value(f, "tokentop_client_cpu_ratio") <= 1.5
    assert value(f, "tokentop_client_loop_lag_p99_seconds") >= 0


def test_the_scrapes_the_feed_and_the_saved_level_agree_and_the_price_is_exact(run: Run) -> None:
    """One run with every outlet at once: the feed's last line is the results file, its last level line the
    saved level, whose figures the endpoint served; the price is cost / 3600 / tok/s x 10^6 to the bit."""
    assert run.feed[-1] == {"event": "results", "results": run.saved}
    (level,) = run.saved["levels"]
    assert [line["level"] for line in run.feed if line["event"] == "level"] == [level]
    final = run.final
    assert value(final, "tokentop_level_requests_completed") == level["completed"]
    assert value(final, "tokentop_requests_completed_total") == run.saved["totals"]["completed"]
    assert level["usd_per_mtok_output"] == COST_PER_HOUR / 3600 / level["output_throughput"] * 1e6
    assert run.saved["config"]["cost_per_hour"] == COST_PER_HOUR
    # and the GPU's energy per token, from the simulator's counter between the scrapes (one a second) in the
    # level's 3 s window; each scrape's value against what the simulator served: test_bench_feed.py
    gpu = level["server"]["gpu"]
    assert gpu["energy_j"] is not None and 0 < gpu["energy_j"] <= run.energy_mj / 1e3
    assert gpu["joules_per_output_token"] == gpu["energy_j"] / gpu["energy_s"] / level["output_throughput"]


def test_the_histograms_count_every_request_in_seconds(run: Run) -> None:
    (level,) = run.results.levels
    f = run.final
    completed = value(f, "tokentop_requests_completed_total")
    assert value(f, "tokentop_e2e_seconds_count") == completed
    assert value(f, "tokentop_e2e_seconds_bucket", le="+Inf") == completed
    assert value(f, "tokentop_tpot_seconds_count") == completed
    # every chunk after the first of each request is one gap (one token a chunk here); the answers cut at the
    # end of the timed level count the gaps that arrived
    cut = value(f, "tokentop_requests_cancelled_total")
    gaps = value(f, "tokentop_itl_chunk_seconds_count")
    assert completed * (OSL - 1) <= gaps <= (completed + cut) * (OSL - 1)
    mean_e2e_s = value(f, "tokentop_e2e_seconds_sum") / completed
    assert level.e2el.min is not None and level.e2el.max is not None
    assert level.e2el.min / 1e3 * 0.99 <= mean_e2e_s <= level.e2el.max / 1e3 * 1.01
    bounds = sorted(float(dict(k[1])["le"]) for k in f if k[0] == "tokentop_ttft_seconds_bucket")
    assert sum(b < 0.010 for b in bounds) >= 8, "too coarse below 10 ms"
    counts = [value(f, "tokentop_ttft_seconds_bucket", le=repr(b)) for b in bounds[:-1]]
    assert counts == sorted(counts)


def _attrs(span: Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        v = kv.value
        kind = v.WhichOneof("value")
        out[kv.key] = (
            [x.string_value for x in v.array_value.values] if kind == "array_value" else getattr(v, kind)
        )
    return out


def test_one_span_per_request_named_by_the_traceparent_the_server_saw(run: Run) -> None:
    totals = run.results.totals
    sent = totals.completed + totals.failed + totals.cancelled
    by_request = {_attrs(span)["tokentop.request.id"]: span for span in run.spans}
    assert len(run.spans) == len(by_request) == sent
    assert set(by_request) <= set(run.seen)
    for request_id, span in by_request.items():
        version, trace_id, parent_id, flags = run.seen[request_id].split("-")
        assert (version, flags) == ("00", "01")
        assert span.trace_id.hex() == trace_id
        assert span.span_id.hex() == parent_id
        assert not span.parent_span_id
        assert span.kind == Span.SPAN_KIND_CLIENT
        assert span.end_time_unix_nano >= span.start_time_unix_nano > 0
    assert len({s.trace_id for s in run.spans}) == sent, "each request is a trace of its own"


def test_the_canarys_figures_are_served_as_the_engine_sees_them(run: Run) -> None:
    busy = [s for s in run.scrapes if ("tokentop_canary_requests", ()) in s]
    assert busy and all(value(s, "tokentop_canary_target_requests_per_second") == CANARY_RATE for s in busy)
    canary, served = run.canary, run.canary_served
    assert canary is not None and canary.n >= 1, "the canary's window moved on three times running"
    assert value(served, "tokentop_canary_requests") == canary.n
    assert value(served, "tokentop_canary_errors") == canary.errors
    for stat, ms in (("mean", canary.mean_ms), ("p99", canary.p99_ms), ("last", canary.last_ms)):
        assert ms is not None and value(served, "tokentop_canary_ttft_seconds", stat=stat) == ms / 1e3
    # the load's figures beside them are the final snapshot's
    assert value(served, "tokentop_requests_completed_total") == value(
        run.final, "tokentop_requests_completed_total"
    )


def test_the_canarys_requests_carry_a_traceparent_and_get_spans_of_their_own(run: Run) -> None:
    sent = {rid: parent for rid, parent in run.seen.items() if rid.startswith(f"{CANARY_WORKER}-")}
    assert sent, "the canary sent nothing in the run"
    assert all(sent.values()), "a canary request came without a traceparent"
    by_request = {_attrs(span)["tokentop.request.id"]: span for span in run.canary_spans}
    assert len(by_request) == len(run.canary_spans) and set(by_request) <= set(sent)
    # a span per finished canary request: only those cut off by the stop have none
    assert len(sent) - len(by_request) <= max_in_flight(CANARY_RATE)
    load_traces = {s.trace_id for s in run.spans}
    for request_id, span in by_request.items():
        _, trace_id, parent_id, _ = sent[request_id].split("-")
        assert (span.trace_id.hex(), span.span_id.hex()) == (trace_id, parent_id)
        assert span.trace_id not in load_traces
        attrs = _attrs(span)
        assert attrs["tokentop.canary"] is True and "tokentop.level.id" not in attrs
        if "error.type" not in attrs:
            assert attrs["gen_ai.usage.output_tokens"] == 1


def test_the_spans_carry_the_genai_attributes(run: Run) -> None:
    (level,) = run.results.levels
    model = run.results.target.model
    ok = [a for a in map(_attrs, run.spans) if "error.type" not in a]
    assert len(ok) == run.results.totals.completed
    for attrs in ok:
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == model
        assert attrs["gen_ai.usage.output_tokens"] == OSL
        assert attrs["gen_ai.usage.input_tokens"] > 0
        assert attrs["server.address"] == "127.0.0.1"
        assert attrs["tokentop.level.id"] == level.level_id
        assert 0 < attrs["gen_ai.response.time_to_first_chunk"] < 60
    ttfts = sorted(a["gen_ai.response.time_to_first_chunk"] * 1e3 for a in ok)
    assert level.ttft.min is not None and level.ttft.max is not None
    assert ttfts[0] <= level.ttft.max and ttfts[-1] >= level.ttft.min


def test_a_collector_that_is_away_is_one_notice_and_holds_the_end_briefly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(otlp, "FLUSH_AT_END_S", 0.2)
    notices: list[str] = []
    spans = otlp.Spans(
        f"http://127.0.0.1:{free_port()}", "k", base_url="http://127.0.0.1:8000/v1", endpoint_kind="chat",
        on_notice=notices.append,
    )  # fmt: skip
    spans.add(
        [RequestRecord(request_id=i, worker=0, seq=i, level_id=1, sent_ns=1, end_ns=2) for i in range(5)]
    )
    started = time.monotonic()
    spans.close()
    # retrying the refused collector alone would take otlp.EXPORT_TIMEOUT_S (5 s)
    assert time.monotonic() - started < 3.0
    assert len(notices) == 1 and notices[0].startswith("cannot send spans to http://127.0.0.1:")
