"""Server quantiles from buckets claim only what the bucket allows: the first bucket is a bound, a bucket
wider than the window's mean a range, and each is saved with its edges; TTFT in parts from the means."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tui.engine.server_metrics.kinds import VLLM
from tui.engine.server_metrics.parse import Buckets
from tui.engine.server_metrics.parts import histogram_record, ttft_parts, with_client
from tui.engine.server_metrics.view import Reading, ServerView, build_view
from tui.engine.server_metrics.window import ABOVE, BOUND, EXACT, RANGE, quantile_estimate

INF = math.inf
S = 1_000_000_000
QUEUE_EDGES = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, INF)  # vLLM's request-latency edges, cut short


def test_everything_in_the_first_bucket_is_a_bound_not_a_midpoint() -> None:
    """What the pane and `watch --output` showed: 100 waits of ~0.9 ms, all under `le="0.3"`: p50 was saved
    as 150 ms beside a mean of 0.9 ms. Now p50 is no number, and its bucket says `< 300 ms`."""
    buckets = Buckets(QUEUE_EDGES, (100.0,) * 7, 100 * 0.0009)
    record = histogram_record(buckets)
    assert record["mean"] == pytest.approx(0.9)
    assert record["p50"] is None and record["p99"] is None
    assert record["buckets"]["p50"] == {"kind": BOUND, "low": 0.0, "high": 300.0}
    assert record["source"] == "estimate from buckets"


def test_a_bucket_wider_than_the_mean_is_a_range_and_a_narrow_one_a_number() -> None:
    # 10 in (0.5, 0.8] with a mean of 0.6 s: 300 ms wide < 600 ms: a number
    narrow = Buckets(QUEUE_EDGES, (0.0, 0.0, 10.0, 10.0, 10.0, 10.0, 10.0), 6.0)
    est = quantile_estimate(0.5, narrow)
    assert est is not None and est.kind == EXACT and est.value == pytest.approx(0.65)
    assert histogram_record(narrow)["p50"] == pytest.approx(650.0)
    # 10 in (1.0, 1.5] plus 90 tiny ones: mean 0.14 s, the bucket 0.5 s wide: p99 is a range
    wide = Buckets(QUEUE_EDGES, (90.0, 90.0, 90.0, 90.0, 100.0, 100.0, 100.0), 90 * 0.001 + 10 * 1.3)
    est = quantile_estimate(0.99, wide)
    assert est is not None and (est.kind, est.low, est.high) == (RANGE, 1.0, 1.5)
    record = histogram_record(wide)
    assert record["p99"] is None and record["buckets"]["p99"] == {
        "kind": RANGE,
        "low": 1000.0,
        "high": 1500.0,
    }
    # past the last finite edge: only `> 2 s`
    above = Buckets(QUEUE_EDGES, (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0), 4 * 9.0)
    est = quantile_estimate(0.5, above)
    assert est is not None and (est.kind, est.low) == (ABOVE, 2.0)
    assert histogram_record(above)["buckets"]["p50"]["high"] is None


def _reading(t_s: int, queue: Buckets, prefill: Buckets, ttft: Buckets) -> Reading:
    return Reading(t_s * S, {"running": 1.0}, {}, {"queue_s": queue, "prefill_s": prefill, "ttft_s": ttft})


def test_the_live_view_and_a_level_summary_are_honest_and_give_ttft_in_parts() -> None:
    """Two scrapes; in between 10 requests waited 0.9 ms each (first bucket), prefilled 200 ms each and the
    server's TTFT summed to 10 x 201 ms."""
    ttft_edges = (0.1, 0.25, 0.5, INF)
    zero_q, zero_t = Buckets(QUEUE_EDGES, (0.0,) * 7, 0.0), Buckets(ttft_edges, (0.0,) * 4, 0.0)
    queue = Buckets(QUEUE_EDGES, (10.0,) * 7, 10 * 0.0009)
    prefill = Buckets(QUEUE_EDGES, (10.0,) * 7, 10 * 0.2)
    ttft = Buckets(ttft_edges, (0.0, 10.0, 10.0, 10.0), 10 * 0.201)
    readings = (_reading(0, zero_q, zero_q, zero_t), _reading(1, queue, prefill, ttft))
    view = build_view(ServerView(kind=VLLM, window_s=10.0), readings, "m")
    assert view.quantiles["queue_s"]["p50"] is None  # no midpoint of the first bucket, live either
    assert view.estimates["queue_s"]["p50"].kind == BOUND and view.estimates["queue_s"]["p50"].high == 0.3
    level = view.level_summary(0, S)
    assert level["queue_ms"]["p50"] is None and level["queue_ms"]["buckets"]["p50"]["high"] == 300.0
    parts = level["ttft_parts"]
    assert parts["queue_ms"] == pytest.approx(0.9) and parts["prefill_ms"] == pytest.approx(200.0)
    assert parts["server_ttft_ms"] == pytest.approx(201.0)
    assert parts["server_other_ms"] == pytest.approx(201.0 - 200.9)
    assert parts["quantiles"]["queue_ms"]["buckets"]["p50"]["kind"] == BOUND
    assert "decode_ms" in parts["missing"]
    joined = with_client(parts, 230.0)
    assert joined is not None and joined["network_client_ms"] == pytest.approx(29.0)


def test_no_part_is_below_zero_and_an_unmatched_one_says_why() -> None:
    """The network part over one population (the client's 10 first tokens between the scrapes the server's
    10 were counted between) is a measurement; over another, or read below 0, it is a bound with a reason
    (seen against vLLM at 24 users: -206 ms, the level's window against the scrapes')."""
    parts: dict[str, Any] = {"server_ttft_ms": 2023.0, "queue_ms": 1305.0, "prefill_ms": 298.0}
    parts |= {"server_other_ms": 420.0, "count": 10.0, "between_ns": (0, S)}
    matched = with_client(parts, 2025.0, 10)
    assert matched is not None and matched["network_client_ms"] == pytest.approx(2.0)
    assert matched["bounds"] == {} and "between_ns" not in matched
    window = with_client(parts, 1817.0)  # the level's window: another population
    assert window is not None and window["network_client_ms"] == 0.0
    assert "different requests" in window["bounds"]["network_client_ms"]
    other = with_client(parts, 2100.0, 14)  # 4 more first tokens than the server counted: other traffic
    assert other is not None and "other traffic" in other["bounds"]["network_client_ms"]
    below = with_client(parts, 2022.0, 10)
    assert (
        below is not None
        and below["network_client_ms"] == 0.0
        and "-1.0 ms" in below["bounds"]["network_client_ms"]
    )
    late = with_client({**parts, "server_other_ms": -30.0}, 2025.0, 10)
    assert late is not None and late["server_other_ms"] == 0.0 and "server_other_ms" in late["bounds"]


def test_a_server_without_parts_has_none() -> None:
    assert ttft_parts({"itl_s": None}) is None
    assert with_client(None, 10.0) is None


def test_sglangs_stages_share_a_family_and_each_part_reads_its_own() -> None:
    """SGLang keeps prefill and decode in one family, `stage` telling them apart: the prefill part reads
    only `prefill_forward`'s series."""
    from tui.engine.server_metrics.kinds import MAPS, SGLANG
    from tui.engine.server_metrics.parse import parse_text
    from tui.engine.server_metrics.view import read

    def series(stage: str, count: float, total_s: float) -> str:
        name = "sglang:per_stage_req_latency_seconds"
        labels = f'model_name="m",stage="{stage}"'
        return (
            f'{name}_bucket{{{labels},le="0.1"}} {count}\n{name}_bucket{{{labels},le="+Inf"}} {count}\n'
            f"{name}_sum{{{labels}}} {total_s}\n{name}_count{{{labels}}} {count}\n"
        )

    text = (
        '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="m"} 1\n'
        "# TYPE sglang:per_stage_req_latency_seconds histogram\n"
        + series("prefill_forward", 4, 0.2)
        + series("decode_forward", 4, 8.0)
        + series("tokenize", 4, 0.004)
    )
    reading = read(parse_text(text, MAPS[SGLANG].families()), 0, SGLANG)
    assert reading.histograms["prefill_s"].count == 4 and reading.histograms["prefill_s"].sum == 0.2
    assert reading.histograms["decode_s"].sum == 8.0


def test_the_canarys_live_window_and_a_levels_figures() -> None:
    """The live figures read the last 10 s only (failures counted apart); a level's read its own span."""
    from tui.engine.config import TargetConfig
    from tui.engine.host.canary import Canary

    canary = Canary(TargetConfig(base_url="http://127.0.0.1:9/v1"), 2.0)
    for i in range(100):  # one a second, TTFT i ms; every tenth failed
        canary._samples.append((i * S, None if i % 10 == 9 else float(i)))
    live = canary.figures(now_ns=99 * S)
    assert (live.n, live.errors) == (9, 2)  # 89..99 inside: 89 and 99 failed, 90..98 ok
    assert live.mean_ms == pytest.approx(94.0) and live.last_ms == 98.0
    level = canary.level(0, 9 * S)
    assert level == {"rate": 2.0, "n": 9, "mean_ms": 4.0, "p99_ms": pytest.approx(7.92), "errors": 1}
