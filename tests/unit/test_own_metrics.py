"""tokentop's own ``/metrics``: the families made from a snapshot (names, buckets, no secret), the flags, and
a port that cannot be bound."""

from __future__ import annotations

import re
import socket

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tui import manual
from tui.cli import build_parser
from tui.cli.bench import bench_config
from tui.configs import OwnMetrics, UsageError
from tui.engine.aggregate import metrics as m
from tui.engine.config import LoadTarget
from tui.engine.server_metrics.view import CanaryFigures
from tui.engine.snapshot import Histogram, LevelView, SloView, Snapshot, Stats
from tui.engine.telemetry.prometheus import SnapshotCollector, histogram_family
from tui.own_metrics import serving_metrics

NAME = re.compile(r"tokentop_[a-z0-9_]+")


def _hist(values_ms: list[float]) -> Histogram:
    counts = m.display_counts(np.asarray(values_ms, dtype=float))
    edges = tuple(float(e) for e in m.DISPLAY_EDGES_MS)
    return Histogram(edges, tuple(int(c) for c in counts), m.stats(np.asarray(values_ms, dtype=float)))


def _snapshot() -> Snapshot:
    slo = SloView(
        met=9, requests=10, cut=0, attainment=0.9, low=0.6, high=0.98, goodput_rps=3.0, goodput_tps=30
    )
    level = LevelView(
        level_id=3, mode="concurrency", value=4, started_s=0, ended_s=None, steady_from_s=1, steady=True,
        completed=10, failed=1, output_tps=100.0, request_per_s=3.3, per_request_tps=50, ttft=Stats(),
        tpot=Stats(), itl_chunk=Stats(), itl_e2e=Stats(), e2el=Stats(), tokens_per_chunk=1, sched_lag=Stats(),
        slo=slo,
    )  # fmt: skip
    return Snapshot(
        seq=1, elapsed_s=5, base_url="http://user:pw@10.0.0.1:8000/v1?api-key=sk-secret", model="m",
        endpoint="chat", demo=False, load=LoadTarget(concurrency=4), level_id=3, in_flight=4, completed=20,
        failed=2, output_tps=99.0, request_per_s=3.0, levels=(level,), errors=(("http_5xx", 2),), cancelled=1,
        ttft_hist={None: _hist([0.5, 2.0, 3.0, 40.0])}, e2e_hist=_hist([100.0, 200.0]),
        input_tokens=320, output_tokens=640,
    )  # fmt: skip


CANARY = CanaryFigures(rate=2.0, n=15, mean_ms=40.0, p99_ms=90.0, last_ms=None, errors=1)


def _exposition(snap: Snapshot, *, canary: CanaryFigures | None = CANARY, load: bool = True) -> str:
    collector = SnapshotCollector()
    collector.source = lambda: snap
    collector.canary = lambda: canary
    collector.load = load
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


def test_every_name_follows_prometheus_rules_and_no_secret_is_served() -> None:
    text = _exposition(_snapshot())
    families = list(text_string_to_metric_families(text))
    for family in families:
        assert NAME.fullmatch(family.name), family.name
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples), family.name
        elif family.type == "histogram":
            assert family.name.endswith("_seconds"), family.name
        else:
            assert not family.name.endswith(("_total", "_ms")), family.name
    assert "sk-secret" not in text and "pw@" not in text
    samples = {(s.name, tuple(s.labels.items())): s.value for f in families for s in f.samples}
    assert samples[("tokentop_requests_sent_total", ())] == 20 + 2 + 1 + 4
    assert samples[("tokentop_requests_failed_total", (("error_class", "http_5xx"),))] == 2
    assert samples[("tokentop_target_users", ())] == 4
    assert samples[("tokentop_level_slo_attainment_ratio", (("bound", "low"),))] == 0.6
    assert samples[("tokentop_output_tokens_total", ())] == 640
    assert samples[("tokentop_canary_ttft_seconds", (("stat", "p99"),))] == 0.09
    assert ("tokentop_canary_ttft_seconds", (("stat", "last"),)) not in samples  # none yet: absent, not 0


def test_a_watch_serves_its_run_and_canary_and_no_load_it_does_not_send() -> None:
    """`tokentop watch` sends no load: no request counters, target, level or client health (a paused load
    and a loop lag of 0 it never measured were served before); the canary's figures are its client view."""
    names = {f.name for f in text_string_to_metric_families(_exposition(_snapshot(), load=False))}
    canary = {"target_requests_per_second", "requests", "errors", "ttft_seconds"}
    assert names == {"tokentop_info", *(f"tokentop_canary_{name}" for name in canary)}
    alone = {
        f.name for f in text_string_to_metric_families(_exposition(_snapshot(), load=False, canary=None))
    }
    assert alone == {"tokentop_info"}


def test_a_histogram_counts_each_value_under_its_bound_in_seconds() -> None:
    fam = histogram_family("ttft_seconds", "doc", _hist([0.5, 2.0, 3.0, 40.0]))
    buckets = {s.labels["le"]: s.value for s in fam.samples if s.name.endswith("_bucket")}
    below = {float(le): n for le, n in buckets.items() if le != "+Inf"}
    assert below[min(b for b in below if b >= 0.0005)] == 1
    assert below[min(b for b in below if b >= 0.0032)] == 3
    assert below[min(b for b in below if b >= 0.04)] == 4
    assert buckets["+Inf"] == 4
    (total,) = [s.value for s in fam.samples if s.name.endswith("_sum")]
    assert total == pytest.approx((0.5 + 2.0 + 3.0 + 40.0) / 1e3)
    assert sum(b < 0.010 for b in below) >= 8  # fine enough below 10 ms


def test_a_busy_port_is_one_line_before_any_load() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = rf"^cannot serve tokentop's metrics on 127.0.0.1:{port}: [^\n]+$"
        with pytest.raises(UsageError, match=line), serving_metrics(OwnMetrics(port=port)):
            pass


def test_the_flags_fill_the_config() -> None:
    ns = build_parser().parse_args(
        ["bench", "--serve-metrics-port", "9464", "--serve-metrics-host", "0.0.0.0"]
    )
    assert bench_config(ns).own_metrics == OwnMetrics(port=9464, host="0.0.0.0")
    ns = build_parser().parse_args(["bench", "--serve-metrics-host", "0.0.0.0"])
    with pytest.raises(UsageError, match="needs --serve-metrics-port"):
        bench_config(ns)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["watch", "--serve-metrics-port", "70000"])


def test_otlp_endpoint_draws_a_fresh_trace_key_per_run() -> None:
    def options(*flags: str) -> tuple[str | None, str]:
        o = bench_config(build_parser().parse_args(["bench", *flags])).options
        return o.otlp_endpoint, o.trace_key

    assert options() == (None, "")
    endpoint, key = options("--otlp-endpoint", "http://127.0.0.1:4318/")
    assert endpoint == "http://127.0.0.1:4318" and re.fullmatch(r"[0-9a-f]{16}", key)
    assert options("--otlp-endpoint", "http://127.0.0.1:4318")[1] != key
    with pytest.raises(UsageError, match="must start with http"):
        options("--otlp-endpoint", "127.0.0.1:4318")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["watch", "--otlp-endpoint", "http://x"])  # watch sends no load to trace


def test_the_monitoring_page_names_every_metric_served_and_no_other() -> None:
    page = manual.page("monitoring")
    assert page is not None
    named = set(re.findall(r"`(tokentop_[a-z0-9_]+)", page.text))
    served = {f.name for f in text_string_to_metric_families(_exposition(_snapshot()))}
    served = {f"{name}_total" if f"{name}_total" in named else name for name in served}
    assert named == served
