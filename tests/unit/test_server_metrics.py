"""The server-metrics scraper's pure parts: parsing recorded and hand-made scrapes, the signal map, the
window math (rates with a counter reset, quantiles from bucket deltas, time-weighted gauge means)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tui.engine.server_metrics.kinds import (
    LLAMACPP,
    MAPS,
    SGLANG,
    TGI,
    UNKNOWN,
    VLLM,
    detect_kind,
    kind_from_owner,
)
from tui.engine.server_metrics.parse import (
    Buckets,
    NotPrometheusError,
    label_values,
    parse_text,
    total,
)
from tui.engine.server_metrics.poller import metrics_url_for
from tui.engine.server_metrics.slots import Slots, parse_slots, slots_url
from tui.engine.server_metrics.view import OK, Reading, ServerView, build_view, model_of, read
from tui.engine.server_metrics.window import (
    counter_increase,
    counter_rate,
    histogram_increase,
    histogram_quantile,
    ratio_of_increases,
    time_weighted_mean,
)

FIXTURES = Path(__file__).parent / "fixtures" / "server_metrics"
S = 1_000_000_000


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- parsing the recorded and hand-made scrapes -------------------------------------------------------------


def test_the_recorded_llama_server_scrape() -> None:
    """Recorded from the real llama-server (Gemma 3 270M, 4 slots) with 5 requests in: 4 busy, 1 deferred."""
    families = parse_text(fixture("llamacpp.txt"))
    assert detect_kind(list(families)) == LLAMACPP
    reading = read(families, 0, LLAMACPP)
    assert reading.gauges == {"running": 4.0, "waiting": 1.0}
    assert reading.counters["llamacpp:prompt_tokens_total"] == 56
    assert reading.counters["llamacpp:tokens_predicted_total"] == 0
    assert reading.histograms == {}
    assert model_of(families) is None  # llama-server labels nothing
    slots = json.loads(fixture("llamacpp_slots.json"))  # GET /slots, recorded at the same moment
    assert sum(slot["is_processing"] for slot in slots) == reading.gauges["running"]


def test_the_simulators_vllm_scrape() -> None:
    families = parse_text(fixture("vllm_sim.txt"))
    assert detect_kind(list(families)) == VLLM
    reading = read(families, 0, VLLM)
    assert reading.gauges == {"running": 4.0, "waiting": 2.0, "kv_usage": pytest.approx(0.032471)}
    assert reading.counters["vllm:generation_tokens_total"] == 209
    assert set(reading.histograms) == {"ttft_s", "itl_s", "queue_s", "e2e_s"}
    assert reading.histograms["ttft_s"].count == 10 and reading.histograms["itl_s"].count == 114
    assert model_of(families) == "sim-gemma-3-270m"


def test_data_parallel_ranks_are_summed_and_the_model_kept() -> None:
    """Two vLLM engines (DP=2) export a series each, side by side: the server's view is their sum."""
    lines = []
    for line in fixture("vllm_sim.txt").splitlines():
        lines.append(line)
        if not line.startswith("#"):
            lines.append(line.replace('model_name="', 'engine="1",model_name="'))
    families = parse_text("\n".join(lines) + "\n")
    reading = read(families, 0, VLLM)
    assert reading.gauges["running"] == 8.0 and reading.gauges["waiting"] == 4.0
    assert reading.histograms["ttft_s"].count == 20
    assert label_values(families, "engine") == ("1",)
    assert model_of(families) == "sim-gemma-3-270m"


def test_a_hand_made_sglang_scrape() -> None:
    families = parse_text(fixture("sglang.txt"))
    assert detect_kind(list(families)) == SGLANG
    reading = read(families, 0, SGLANG)
    assert reading.gauges["running"] == 5.0  # two tensor-parallel ranks, summed
    assert reading.gauges["waiting"] == 7.0 and reading.gauges["kv_usage"] == 0.28
    assert reading.gauges["prefix_cache_hit_rate"] == pytest.approx(0.0075, abs=1e-4)
    assert reading.gauges["generation_tok_s"] == 355.0  # the gauge SGLang exports beside the counter
    assert reading.counters["sglang:prompt_tokens_total"] == 8_128_902 + 1_000
    assert tuple(reading.histograms["ttft_s"].cumulative) == (10.0, 30.0, 40.0, 40.0)
    assert model_of(families) == "meta-llama/Llama-3.1-8B-Instruct"


def test_a_hand_made_tgi_scrape() -> None:
    """TGI's counters carry no _total; its generated-token counts come as a histogram's sum."""
    families = parse_text(fixture("tgi.txt"))
    assert detect_kind(list(families)) == TGI
    reading = read(families, 0, TGI)
    assert reading.gauges == {"running": 8.0, "waiting": 3.0}
    assert reading.counters["tgi_request_generated_tokens_sum"] == 14080
    assert total(families, "tgi_request_success") == 55
    assert set(reading.histograms) == {"queue_s", "e2e_s"}


def test_an_unknown_server_shows_its_gauges_by_name() -> None:
    families = parse_text('# TYPE my_queue gauge\nmy_queue{shard="a"} 2\nmy_queue{shard="b"} 3\n')
    assert detect_kind(list(families)) == UNKNOWN
    reading = read(families, 0, UNKNOWN)
    assert reading.other_gauges == {"my_queue": 5.0} and reading.gauges == {}


@pytest.mark.parametrize(
    "body", ["<html><body>nope</body></html>", '{"error": "not found"}', "", "hello world"]
)
def test_a_body_that_is_not_prometheus_text(body: str) -> None:
    with pytest.raises(NotPrometheusError):
        parse_text(body)


def test_server_kind_guesses_and_the_metrics_url() -> None:
    assert kind_from_owner("vllm") == VLLM and kind_from_owner("sglang") == SGLANG
    assert kind_from_owner("llamacpp") == LLAMACPP and kind_from_owner("", "llama.cpp") == LLAMACPP
    assert kind_from_owner("openai") == UNKNOWN
    assert metrics_url_for("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/metrics"
    assert metrics_url_for("http://h:1/v1/") == "http://h:1/metrics"
    assert metrics_url_for("https://h/proxy/v1") == "https://h/proxy/metrics"
    assert metrics_url_for("http://h:1") == "http://h:1/metrics"


# --- the window math ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "grown"),
    [
        ([0, 5, 10, 20], 20),
        ([100, 110, 3, 8], 10 + 3 + 5),  # restarted between 110 and 3: the 3 counts, nothing is negative
        ([7], 0),
        ([5, 5, 5], 0),
    ],
)
def test_counter_increase_with_a_reset(values: list[float], grown: float) -> None:
    assert counter_increase(values) == grown


def test_counter_rate_over_a_window() -> None:
    points = [(0, 0.0), (1 * S, 10.0), (2 * S, 20.0), (3 * S, 2.0), (4 * S, 12.0)]  # restart after 2 s
    assert counter_rate(points, 0, 2 * S) == 10.0
    assert counter_rate(points, 0, 4 * S) == pytest.approx((20 + 2 + 10) / 4)
    assert counter_rate(points, 2 * S, 2 * S) is None  # one reading: no interval, no rate
    hits = [(0, 0.0), (S, 30.0)]
    queries = [(0, 0.0), (S, 120.0)]
    assert ratio_of_increases(hits, queries, 0, S) == 0.25
    assert ratio_of_increases(hits, [(0, 5.0), (S, 5.0)], 0, S) is None  # nothing asked: no rate


def buckets(edges: list[float], per_bucket: list[float], sum_: float = 0.0) -> Buckets:
    """Cumulative buckets from per-bucket counts (hand-made histograms read more easily that way)."""
    cumulative = [sum(per_bucket[: i + 1]) for i in range(len(per_bucket))]
    return Buckets(tuple(edges), tuple(float(c) for c in cumulative), sum_)


INF = math.inf


@pytest.mark.parametrize(
    ("q", "per_bucket", "expected"),
    [
        (0.5, [10, 10, 0, 0], 0.1),  # rank 10 is the top of the first bucket
        (0.25, [10, 10, 0, 0], 0.05),  # halfway into the first bucket, which starts at 0
        (0.75, [10, 10, 0, 0], 0.3),  # halfway into (0.1, 0.5]
        (0.5, [0, 0, 4, 0], 0.75),  # all in (0.5, 1.0]
        (0.99, [0, 0, 1, 9], 1.0),  # the rank lands in +Inf: the highest finite edge
        (0.0, [0, 3, 1, 0], 0.1),  # the lowest observation's bucket starts at 0.1
    ],
)
def test_histogram_quantile_interpolates_inside_the_bucket(
    q: float, per_bucket: list[float], expected: float
) -> None:
    h = buckets([0.1, 0.5, 1.0, INF], per_bucket)
    assert histogram_quantile(q, h) == pytest.approx(expected)


def test_histogram_quantile_of_nothing_and_a_bad_q() -> None:
    assert histogram_quantile(0.5, buckets([0.1, INF], [0, 0])) is None
    with pytest.raises(ValueError):
        histogram_quantile(1.5, buckets([0.1, INF], [1, 0]))


def test_windowed_quantiles_come_from_bucket_deltas() -> None:
    """Before the window: 100 fast requests. Inside it: 10 slow ones. The window's p50 is slow."""
    edges = [0.1, 1.0, 10.0, INF]
    before = buckets(edges, [100, 0, 0, 0], 5.0)
    mid = buckets(edges, [100, 0, 4, 0], 25.0)
    after = buckets(edges, [100, 0, 10, 0], 55.0)
    grown = histogram_increase([before, mid, after])
    assert grown is not None
    assert grown.cumulative == (0.0, 0.0, 10.0, 10.0) and grown.sum == 50.0
    assert histogram_quantile(0.5, grown) == pytest.approx(5.5)  # halfway through (1, 10]
    assert histogram_quantile(0.5, after) == pytest.approx(0.1 * 55 / 100)  # the whole run: fast


def test_histogram_increase_across_a_server_restart() -> None:
    edges = [0.1, 1.0, INF]
    old = buckets(edges, [50, 50, 0], 40.0)
    restarted = buckets(edges, [2, 1, 0], 1.0)  # counts dropped: the server restarted from zero
    later = buckets(edges, [2, 4, 0], 3.5)
    grown = histogram_increase([old, restarted, later])
    assert grown is not None and grown.cumulative == (2.0, 6.0, 6.0) and grown.sum == 3.5
    assert histogram_increase([old]) is None


@pytest.mark.parametrize(
    ("t_from", "t_to", "mean"),
    [
        (0, 4 * S, (2 * 1 + 4 * 2 + 0 * 1) / 4),  # 2 held 1 s, 4 held 2 s, 0 held the last second
        (1 * S, 3 * S, 4.0),
        (int(0.5 * S), int(1.5 * S), 3.0),  # half a second of 2, half of 4
        (5 * S, 6 * S, 0.0),  # the last reading holds
        (2 * S, 2 * S, 4.0),  # a zero-length interval: the reading in force
    ],
)
def test_time_weighted_mean(t_from: int, t_to: int, mean: float) -> None:
    points = [(0, 2.0), (1 * S, 4.0), (3 * S, 0.0)]
    assert time_weighted_mean(points, t_from, t_to) == pytest.approx(mean)


def test_time_weighted_mean_before_any_reading() -> None:
    assert time_weighted_mean([(5 * S, 1.0)], 0, S) is None
    assert time_weighted_mean([(5 * S, 1.0), (7 * S, 3.0)], 0, 8 * S) == pytest.approx((2 + 3) / 3)


# --- the view built from readings ---------------------------------------------------------------------------


def test_the_view_and_a_level_summary_from_readings() -> None:
    """Three scrapes a second apart; the second level starts at 1 s."""
    edges = (0.1, 1.0, INF)

    def reading(
        t_s: int, running: float, waiting: float, tokens: float, ttft: tuple[float, ...], ttft_sum: float
    ) -> Reading:
        return Reading(
            t_s * S,
            {"running": running, "waiting": waiting, "kv_usage": 0.5},
            {"vllm:generation_tokens_total": tokens, "vllm:num_preemptions_total": 0.0},
            {"ttft_s": Buckets(edges, ttft, ttft_sum)},
        )

    readings = (
        reading(0, 1, 0, 0, (0.0, 0.0, 0.0), 0.0),
        reading(1, 4, 2, 100, (5.0, 5.0, 5.0), 0.25),
        reading(2, 4, 4, 300, (5.0, 15.0, 15.0), 9.25),  # 10 more in (0.1, 1], 0.9 s each
    )
    view = build_view(ServerView(kind=VLLM, window_s=10.0), readings, "m")
    assert view.status == OK and view.model == "m" and view.scrapes == 1
    assert view.current["running"] == 4 and view.current["waiting"] == 4
    assert view.current["generation_tok_s"] == 150.0
    assert view.current["prefix_cache_hit_rate"] is None  # not exported: None, never 0
    assert view.quantiles["ttft_s"]["count"] == 15
    assert [v for _, v in view.history("generation_tok_s")] == [100.0, 200.0]
    assert [v for _, v in view.history("waiting")] == [0, 2, 4]
    level = view.level_summary(1 * S, 2 * S)
    assert level["running_mean"] == 4.0 and level["waiting_mean"] == 2.0
    assert level["generation_tok_s"] == 200.0 and level["preemptions_per_s"] == 0.0
    assert level["ttft_ms"]["count"] == 10.0
    # 10 in (0.1, 1], a bucket no wider than the window's mean (900 ms): halfway, in ms
    assert level["ttft_ms"]["p50"] == pytest.approx(100 + 900 * 0.5)
    assert level["ttft_ms"]["mean"] == pytest.approx(900.0)
    assert "running" in level["found"] and "ttft_s" in level["found"]


@pytest.mark.parametrize(
    ("name", "kind"),
    [("vllm_sim.txt", VLLM), ("sglang.txt", SGLANG), ("llamacpp.txt", LLAMACPP), ("tgi.txt", TGI)],
)
def test_parsing_only_the_wanted_families_reads_the_same(name: str, kind: str) -> None:
    """The poller hands the parser only the families the signals read: the reading must not change."""
    text = fixture(name) + '# TYPE vllm:unread_seconds histogram\nvllm:unread_seconds_bucket{le="+Inf"} 3\n'
    wanted = MAPS[kind].families()
    assert read(parse_text(text, wanted), 0, kind) == read(parse_text(text), 0, kind)
    assert "vllm:unread_seconds" not in parse_text(text, wanted)


def test_llama_server_slots() -> None:
    """The recorded `GET /slots` of the real llama-server: 4 slots, all busy, 4096 context."""
    slots = parse_slots(json.loads(fixture("llamacpp_slots.json")))
    assert slots == Slots(total=4, busy=4, n_ctx=4096, tokens_in_use=35 + 21 + 35 + 21 + 35 + 21 + 36 + 22)
    assert parse_slots({"error": "slots disabled"}) is None and parse_slots([1, 2]) is None
    assert slots_url("http://h:8081/metrics") == "http://h:8081/slots"
