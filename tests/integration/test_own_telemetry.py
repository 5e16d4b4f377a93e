"""tokentop's own telemetry, from one short bench against the simulator: its ``/metrics`` scraped while the
bench runs, and its final figures checked against the level the results saved."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import tui.bench.run as bench
from tests.support.ports import free_port
from tui.cli import build_parser
from tui.cli.bench import bench_config
from tui.engine.host.handle import EngineHandle
from tui.engine.results.files import read_results
from tui.engine.results.model import Results
from tui.engine.telemetry.prometheus import SnapshotCollector
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(90)

OSL = 8
REQUESTS = 12


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
    extra: dict[str, Any] = field(default_factory=dict)


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


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One bench: 2 users, a TTFT SLO, tokentop's metrics on a free port, scraped throughout."""
    tmp = tmp_path_factory.mktemp("telemetry")
    made: list[EngineHandle] = []

    def factory(*args: Any, **kwargs: Any) -> EngineHandle:
        made.append(EngineHandle(*args, **kwargs))
        return made[-1]

    port = free_port()
    scraper = Scraper(f"http://127.0.0.1:{port}/metrics")
    with SimServer("small-gpu", time_scale=4.0) as sim:
        ns = build_parser().parse_args(
            ["bench", "--url", sim.url, "--concurrency", "2", "--requests", str(REQUESTS), "--osl", str(OSL),
             "--isl", "16", "--no-isl-probe", "--no-record", "--no-server-metrics", "--quiet",
             "--slo-ttft-ms", "1000", "--serve-metrics-port", str(port), "-o", str(tmp / "results.json")]
        )  # fmt: skip
        scraper.start()
        try:
            status = bench.run(bench_config(ns), engine_factory=factory)
        finally:
            scraper.stop.set()
            scraper.join(5)
    (handle,) = made
    results = read_results(tmp / "results.json")
    assert isinstance(results, Results)
    collector = SnapshotCollector()
    collector.source = handle.snapshot
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    final = parse(generate_latest(registry).decode())
    yield Run(status, results, scraper.scrapes, final, handle)


def test_the_endpoint_serves_the_client_view_while_the_bench_runs(run: Run) -> None:
    assert run.status == 0
    busy = [s for s in run.scrapes if value(s, "tokentop_requests_sent_total") > 0]
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


def test_the_histograms_count_every_request_in_seconds(run: Run) -> None:
    (level,) = run.results.levels
    f = run.final
    completed = value(f, "tokentop_requests_completed_total")
    assert value(f, "tokentop_e2e_seconds_count") == completed
    assert value(f, "tokentop_e2e_seconds_bucket", le="+Inf") == completed
    assert value(f, "tokentop_tpot_seconds_count") == completed
    # every chunk after the first of each request is one gap (one token a chunk here)
    assert value(f, "tokentop_itl_chunk_seconds_count") == completed * (OSL - 1)
    mean_e2e_s = value(f, "tokentop_e2e_seconds_sum") / completed
    assert level.e2el.min is not None and level.e2el.max is not None
    assert level.e2el.min / 1e3 * 0.99 <= mean_e2e_s <= level.e2el.max / 1e3 * 1.01
    bounds = sorted(float(dict(k[1])["le"]) for k in f if k[0] == "tokentop_ttft_seconds_bucket")
    assert sum(b < 0.010 for b in bounds) >= 8, "too coarse below 10 ms"
    counts = [value(f, "tokentop_ttft_seconds_bucket", le=repr(b)) for b in bounds[:-1]]
    assert counts == sorted(counts)
