"""Which server this is (by metric prefix) and where each common signal comes from on it.

Every signal the face shows has one meaning across servers; the table below is the single place that says
which metric of which server feeds it (what each means is on the manual's `server` page). A server that
exports none of a signal's metrics simply has no value for it (None), never a zero.

Signal (unit): its source on vLLM / SGLang / llama.cpp / TGI ("-": not exported; "rate": windowed counter
delta per second; "a / b": ratio of the two counters' deltas over the same window):

- running (requests): `vllm:num_requests_running` / `sglang:num_running_reqs` /
  `llamacpp:requests_processing` / `tgi_batch_current_size`
- waiting (requests): `vllm:num_requests_waiting` / `sglang:num_queue_reqs` / `llamacpp:requests_deferred` /
  `tgi_queue_size`
- kv_usage (0..1): `vllm:kv_cache_usage_perc` (`vllm:gpu_cache_usage_perc` before 0.9) /
  `sglang:token_usage` / `llamacpp:kv_cache_usage_ratio` (older builds) / -
- preemptions_per_s (1/s): rate `vllm:num_preemptions_total` / - / - / -
- prefix_cache_hit_rate (0..1): `vllm:prefix_cache_hits_total` / `vllm:prefix_cache_queries_total` /
  gauge `sglang:cache_hit_rate` / `llamacpp:prompt_tokens_cached_total` / (cached +
  `llamacpp:prompt_tokens_total`) / -
- generation_tok_s (tok/s): rate `vllm:generation_tokens_total` / rate `sglang:generation_tokens_total`
  (gauge `sglang:gen_throughput` without it) / rate `llamacpp:tokens_predicted_total` /
  rate `tgi_request_generated_tokens_sum`
- prompt_tok_s (tok/s): rate `vllm:prompt_tokens_total` / rate `sglang:prompt_tokens_total` /
  rate `llamacpp:prompt_tokens_total` / rate `tgi_request_input_length_sum`
- spec_acceptance (0..1): `vllm:spec_decode_num_accepted_tokens_total` /
  `vllm:spec_decode_num_draft_tokens_total` / - / the same two with `llamacpp:` / -
- ttft_s (s): `vllm:time_to_first_token_seconds` / `sglang:time_to_first_token_seconds` / - / -
- itl_s (s): `vllm:inter_token_latency_seconds` (`vllm:time_per_output_token_seconds` before) /
  `sglang:inter_token_latency_seconds` / - / -
- queue_s (s): `vllm:request_queue_time_seconds` / `sglang:queue_time_seconds` / - /
  `tgi_request_queue_duration`
- e2e_s (s): `vllm:e2e_request_latency_seconds` / `sglang:e2e_request_latency_seconds` / - /
  `tgi_request_duration`
- prefill_s (s): `vllm:request_prefill_time_seconds` /
  `sglang:per_stage_req_latency_seconds{stage="prefill_forward"}` / - / -
- decode_s (s): `vllm:request_decode_time_seconds` /
  `sglang:per_stage_req_latency_seconds{stage="decode_forward"}` / - / -
- inference_s (s): `vllm:request_inference_time_seconds` / - / - / `tgi_request_inference_duration`

TTFT in parts (`parts`) reads queue_s, prefill_s and ttft_s. llama.cpp exports no latency histogram at all
(only `llamacpp:prompt_seconds_total`, prefill time summed over every request, with no request count beside
it), so it has no parts; TGI has queue and inference time but no TTFT nor per-request prefill.
A candidate `name{label="value"}` reads only the series with that label (SGLang's stages share one family).

TGI's `tgi_request_mean_time_per_token_duration` is a per-request mean (TPOT), not an inter-token gap, so it
is deliberately not mapped to `itl_s`. Rates are windowed deltas (`tui.engine.server_metrics.window`); a ratio
of rates is the ratio of the two deltas over the same window. Gauges and counters are summed over label sets
(data-parallel engines, tensor-parallel ranks); `model_name` (or `model`) labels name the served model.
"""

from __future__ import annotations

from dataclasses import dataclass

VLLM, SGLANG, LLAMACPP, TGI, UNKNOWN = "vllm", "sglang", "llamacpp", "tgi", "unknown"

_PREFIXES = ((VLLM, "vllm:"), (SGLANG, "sglang:"), (LLAMACPP, "llamacpp:"), (TGI, "tgi_"))

GAUGES = ("running", "waiting", "kv_usage")
"""Signals read as gauges (time-averaged per level)."""
RATES = ("preemptions_per_s", "prefix_cache_hit_rate", "generation_tok_s", "prompt_tok_s", "spec_acceptance")
"""Signals derived from counters over a window (a gauge stands in where a server only exports one)."""
HISTOGRAMS = ("ttft_s", "itl_s", "queue_s", "e2e_s", "prefill_s", "decode_s", "inference_s")
"""Server-side latency distributions, as windowed quantiles from bucket deltas."""


@dataclass(frozen=True)
class Rate:
    """A signal from counters: rate of the sum of `numerator`, or a ratio of rates when `denominator` is set.

    `gauge`: a metric to read as-is when the server exports the signal as a gauge instead."""

    numerator: tuple[str, ...] = ()
    denominator: tuple[str, ...] = ()
    gauge: str | None = None
    per_s: bool = True
    """True: numerator delta / seconds; False: numerator delta / denominator delta (a fraction)."""


@dataclass(frozen=True)
class ServerMap:
    """Where one server kind keeps each signal; candidates in order of preference (newest name first)."""

    gauges: dict[str, tuple[str, ...]]
    rates: dict[str, Rate]
    histograms: dict[str, tuple[str, ...]]
    hint: str
    """What to do when its /metrics is missing."""

    def counters(self) -> tuple[str, ...]:
        """Every counter name the rates read (what a scrape keeps of the counters)."""
        names: list[str] = []
        for rate in self.rates.values():
            names += [*rate.numerator, *rate.denominator]
        return tuple(dict.fromkeys(names))

    def families(self) -> frozenset[str]:
        """The family names every signal reads (what a scrape of this server needs parsed)."""
        names: list[str] = [n for group in self.gauges.values() for n in group]
        names += [n for group in self.histograms.values() for n in group]
        names += [r.gauge for r in self.rates.values() if r.gauge is not None]
        names += list(self.counters())
        out = set()
        for name in names:
            name = name.partition("{")[0]
            if name.endswith(("_sum", "_count")) and not name.endswith("_total"):
                out.add(name.rpartition("_")[0])  # a histogram's sum: its family
            out.add(name[: -len("_total")] if name.endswith("_total") else name)
        return frozenset(out)


MAPS: dict[str, ServerMap] = {
    VLLM: ServerMap(
        gauges={
            "running": ("vllm:num_requests_running",),
            "waiting": ("vllm:num_requests_waiting",),
            "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        },
        rates={
            "preemptions_per_s": Rate(("vllm:num_preemptions_total",)),
            "prefix_cache_hit_rate": Rate(
                ("vllm:prefix_cache_hits_total",), ("vllm:prefix_cache_queries_total",), per_s=False
            ),
            "generation_tok_s": Rate(("vllm:generation_tokens_total",)),
            "prompt_tok_s": Rate(("vllm:prompt_tokens_total",)),
            "spec_acceptance": Rate(
                ("vllm:spec_decode_num_accepted_tokens_total",),
                ("vllm:spec_decode_num_draft_tokens_total",),
                per_s=False,
            ),
        },
        histograms={
            "ttft_s": ("vllm:time_to_first_token_seconds",),
            "itl_s": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
            "queue_s": ("vllm:request_queue_time_seconds",),
            "e2e_s": ("vllm:e2e_request_latency_seconds",),
            "prefill_s": ("vllm:request_prefill_time_seconds",),
            "decode_s": ("vllm:request_decode_time_seconds",),
            "inference_s": ("vllm:request_inference_time_seconds",),
        },
        hint="vLLM serves /metrics by default: is a proxy in the way? point --metrics-url at the server",
    ),
    SGLANG: ServerMap(
        gauges={
            "running": ("sglang:num_running_reqs",),
            "waiting": ("sglang:num_queue_reqs",),
            "kv_usage": ("sglang:token_usage",),
        },
        rates={
            "prefix_cache_hit_rate": Rate(gauge="sglang:cache_hit_rate", per_s=False),
            "generation_tok_s": Rate(("sglang:generation_tokens_total",), gauge="sglang:gen_throughput"),
            "prompt_tok_s": Rate(("sglang:prompt_tokens_total",)),
        },
        histograms={
            "ttft_s": ("sglang:time_to_first_token_seconds",),
            "itl_s": ("sglang:inter_token_latency_seconds",),
            "queue_s": ("sglang:queue_time_seconds",),
            "e2e_s": ("sglang:e2e_request_latency_seconds",),
            "prefill_s": ('sglang:per_stage_req_latency_seconds{stage="prefill_forward"}',),
            "decode_s": ('sglang:per_stage_req_latency_seconds{stage="decode_forward"}',),
        },
        hint="SGLang: start with --enable-metrics",
    ),
    LLAMACPP: ServerMap(
        gauges={
            "running": ("llamacpp:requests_processing",),
            "waiting": ("llamacpp:requests_deferred",),
            "kv_usage": ("llamacpp:kv_cache_usage_ratio",),
        },
        rates={
            "prefix_cache_hit_rate": Rate(
                ("llamacpp:prompt_tokens_cached_total",),
                ("llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total"),
                per_s=False,
            ),
            "generation_tok_s": Rate(("llamacpp:tokens_predicted_total",)),
            "prompt_tok_s": Rate(("llamacpp:prompt_tokens_total",)),
            "spec_acceptance": Rate(
                ("llamacpp:spec_decode_num_accepted_tokens_total",),
                ("llamacpp:spec_decode_num_draft_tokens_total",),
                per_s=False,
            ),
        },
        histograms={},
        hint="llama-server: start with --metrics",
    ),
    TGI: ServerMap(
        gauges={"running": ("tgi_batch_current_size",), "waiting": ("tgi_queue_size",)},
        rates={
            "generation_tok_s": Rate(("tgi_request_generated_tokens_sum",)),
            "prompt_tok_s": Rate(("tgi_request_input_length_sum",)),
        },
        histograms={
            "queue_s": ("tgi_request_queue_duration",),
            "e2e_s": ("tgi_request_duration",),
            "inference_s": ("tgi_request_inference_duration",),
        },
        hint="TGI serves /metrics on its own port by default: point --metrics-url at the router",
    ),
}

UNKNOWN_HINT = "no Prometheus metrics there: point --metrics-url at the server's /metrics"


def detect_kind(family_names: tuple[str, ...] | list[str]) -> str:
    """The server kind whose prefix most family names carry; `unknown` when none does."""
    best, best_n = UNKNOWN, 0
    for kind, prefix in _PREFIXES:
        n = sum(1 for name in family_names if name.startswith(prefix))
        if n > best_n:
            best, best_n = kind, n
    return best


def kind_from_owner(owned_by: str, server_header: str = "") -> str:
    """A guess at the server kind from `/v1/models`' `owned_by` and the `Server` header, for the hint
    when `/metrics` itself is missing (vLLM says `vllm`, SGLang `sglang`, llama-server `llamacpp`)."""
    text = f"{owned_by} {server_header}".lower()
    for kind, needles in (
        (VLLM, ("vllm",)),
        (SGLANG, ("sglang",)),
        (LLAMACPP, ("llamacpp", "llama.cpp")),
        (TGI, ("text-generation", "tgi")),
    ):
        if any(n in text for n in needles):
            return kind
    return UNKNOWN


def hint_for(kind: str) -> str:
    """The one hint that fits a server kind whose metrics are missing."""
    server_map = MAPS.get(kind)
    return server_map.hint if server_map is not None else UNKNOWN_HINT
