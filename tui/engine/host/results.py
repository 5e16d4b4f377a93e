"""The results JSON: per load level, the keys and meanings of ``vllm bench serve --save-result``, plus ours.

Per level (over its steady-state window; see `tui.engine.metrics.steady_from_ns`): ``duration``,
``completed``, ``failed``, ``total_input_tokens``, ``total_output_tokens``, ``request_throughput``,
``output_throughput``, ``total_token_throughput``, ``request_goodput`` (with SLOs), and
``mean_/median_/std_/p50_/p90_/p95_/p99_`` x ``ttft/tpot/itl/e2el`` + ``_ms``. tokentop's own: the LLMPerf
ITL (``*_itl_e2e_ms``), ``tokens_per_chunk``, ``errors`` by class, scheduling lag, the window itself.
Never contains the API key or header values.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from tui import __version__
from tui.engine.aggregate.metrics import KNEE_RULE, KNEE_TOLERANCE
from tui.engine.snapshot import LevelView, Snapshot, Stats

if TYPE_CHECKING:
    from tui.engine.host.handle import EngineHandle

DEFINITIONS: dict[str, str] = {
    "ttft": "time to first token: first chunk with generated text (content or reasoning) minus request sent",
    "tpot": "time per output token excluding the first: (E2E - TTFT) / (output tokens - 1), per request",
    "itl": "inter-token latency as vLLM/SGLang: gaps between consecutive content chunks, all gaps pooled",
    "itl_e2e": "LLMPerf inter-token latency: E2E / output tokens, per request, TTFT included",
    "e2el": "end-to-end latency: end of stream minus request sent",
    "duration": "length in seconds of the level's steady-state window (the throughput denominator)",
    "steady_window": "starts once every request of earlier levels has ended and one median E2E of this level "
    "has passed; ends at the next load change (or the last complete data)",
    "completed": "successful requests sent in the steady window (the population of the latency stats)",
    "failed": "failed requests sent in the steady window",
    "output_throughput": "output tokens of content chunks arriving in the window / duration "
    "(tokens per chunk from server usage)",
    "request_throughput": "successful requests ending in the window / duration",
    "total_token_throughput": "output_throughput plus input tokens of requests sent in the window / duration",
    "request_goodput": "requests ending in the window that met every SLO given / duration",
    "tokens_per_chunk": "output tokens / content chunks, mean over requests (>1 with speculative decoding)",
    "per_request_output_throughput": "median over requests of (output tokens - 1) / (E2E - TTFT), tokens/s",
    "sched_lag": "open loop: actual send time minus scheduled arrival time",
    "output tokens": "server usage.completion_tokens when reported, else one per content chunk",
    "input tokens": "server usage.prompt_tokens when reported, else the requested input length",
    "knee": KNEE_RULE.format(tol=KNEE_TOLERANCE),
    "stats": "mean, std (population), median, and linear-interpolated percentiles, as numpy/vLLM",
    "client_saturated": "a worker's event-loop lag p99 over lag_threshold_ms or CPU share over cpu_threshold "
    "in two consecutive disjoint health windows (health_window_s each), at any time in the run; "
    "max_loop_lag_p99_ms and max_cpu_share are the raw rolling maxima, a momentary stall included; "
    "saturated_spans_s: [from, to] seconds of run time while flagged (to null: until the end), the condition "
    "having begun one health window before from",
}

_METRICS = (
    ("ttft", "ttft"),
    ("tpot", "tpot"),
    ("itl", "itl_chunk"),
    ("e2el", "e2el"),
    ("itl_e2e", "itl_e2e"),
)


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def _stats_keys(prefix: str, s: Stats) -> dict[str, Any]:
    return {
        f"mean_{prefix}_ms": _num(s.mean),
        f"median_{prefix}_ms": _num(s.p50),
        f"std_{prefix}_ms": _num(s.std),
        f"p50_{prefix}_ms": _num(s.p50),
        f"p90_{prefix}_ms": _num(s.p90),
        f"p95_{prefix}_ms": _num(s.p95),
        f"p99_{prefix}_ms": _num(s.p99),
        f"min_{prefix}_ms": _num(s.min),
        f"max_{prefix}_ms": _num(s.max),
    }


def level_result(lv: LevelView, extra: dict[str, Any], load_info: dict[str, Any]) -> dict[str, Any]:
    """One level in vLLM's vocabulary (plus tokentop's keys)."""
    out: dict[str, Any] = {"level_id": lv.level_id, "mode": lv.mode}
    if lv.mode == "concurrency":
        out["concurrency"] = int(lv.value)
    else:
        out["request_rate"] = lv.value
        out.update(load_info)
    out.update(
        {
            "duration": lv.window_s,
            "completed": lv.window_completed,
            "failed": lv.window_failed,
            "total_input_tokens": lv.input_tokens,
            "total_output_tokens": lv.output_tokens,
            "request_throughput": _num(lv.request_per_s),
            "output_throughput": _num(lv.output_tps),
            "total_token_throughput": _num(lv.total_tps),
        }
    )
    if lv.goodput_per_s is not None:
        out["request_goodput"] = _num(lv.goodput_per_s)
    for prefix, attr in _METRICS:
        out.update(_stats_keys(prefix, getattr(lv, attr)))
    out.update(
        {
            "tokens_per_chunk": _num(lv.tokens_per_chunk),
            "per_request_output_throughput": _num(lv.per_request_tps),
            "steady": lv.steady,
            "steady_from_s": lv.steady_from_s,
            "window_from_s": lv.window_from_s,
            "window_to_s": lv.window_to_s,
            "started_s": lv.started_s,
            "ended_s": lv.ended_s,
            "level_completed": lv.completed,
            "level_failed": lv.failed,
            "cancelled": extra.get("cancelled", 0),
            "errors": dict(lv.errors),
            "exact_stats": lv.exact,
            "client": {
                "max_loop_lag_p99_ms": extra.get("max_loop_lag_p99_ms", 0.0),
                "max_cpu_share": extra.get("max_cpu_share", 0.0),
            },
        }
    )
    if lv.mode == "rate":
        out.update(_stats_keys("sched_lag", lv.sched_lag))
    return out


def _safe_url(url: str) -> str:
    """The URL without any user:password part."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


def build_results(
    handle: EngineHandle,
    snap: Snapshot,
    views: list[tuple[LevelView, dict[str, Any]]],
    run: dict[str, Any],
) -> dict[str, Any]:
    """The whole results document for what was measured so far. ``run``: whole-run client maxima
    (``max_loop_lag_p99_ms``, ``max_cpu_share``: raw, a momentary stall included), ``saturated`` (sustained
    saturation at some point, `tui.engine.health.Sustain`) and ``notices``."""
    target, workload, options, load = handle.target, handle.workload, handle.options, handle.load
    knee = snap.knee
    levels = []
    for lv, extra in views:
        info: dict[str, Any] = {}
        if lv.mode == "rate":
            info = {"arrival": load.arrival, "max_concurrency": load.max_concurrency}
        levels.append(level_result(lv, extra, info))
    peak = max((lv.output_tps for lv, _ in views if lv.steady and math.isfinite(lv.output_tps)), default=None)
    store_health = snap.health
    return {
        "tool": "tokentop",
        "version": __version__,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(handle.started_at or time.time())),
        "target": {"url": _safe_url(target.base_url), "model": snap.model, "endpoint": target.endpoint},
        "config": {
            "isl": workload.isl,
            "osl": workload.osl,
            "fixed_osl": workload.fixed_osl,
            "seed": workload.seed,
            "timeout_s": target.timeout_s,
            "workers": handle.workers,
            "header_names": [name for name, _ in target.headers],
            "extra_body": dict(target.extra_body),
            "demo": target.demo,
            "slo_ttft_ms": options.slo_ttft_ms,
            "slo_tpot_ms": options.slo_tpot_ms,
        },
        "definitions": DEFINITIONS,
        "levels": levels,
        "saturation": {
            "knee": None
            if knee is None
            else {
                "level_id": knee.level_id,
                "value": knee.value,
                "output_throughput": knee.output_tps,
                "peak_output_throughput": knee.peak_tps,
            },
            "peak_output_throughput": peak,
            "rule": KNEE_RULE.format(tol=KNEE_TOLERANCE),
        },
        "client": {
            "workers": handle.workers,
            "max_loop_lag_p99_ms": run["max_loop_lag_p99_ms"],
            "max_cpu_share": run["max_cpu_share"],
            "lag_threshold_ms": options.lag_threshold_ms,
            "cpu_threshold": options.cpu_threshold,
            "health_window_s": options.health_window_s,
            "saturated": run["saturated"],
            "saturated_spans_s": run.get("saturated_spans_s", []),
            "last": {
                "loop_lag_p99_ms": store_health.loop_lag_p99_ms,
                "cpu_share": store_health.cpu_share,
                "reason": store_health.reason,
            },
        },
        "totals": {
            "completed": snap.completed,
            "failed": snap.failed,
            "cancelled": snap.cancelled,
            "errors": dict(snap.errors),
        },
        "fatal": snap.fatal,
        "notices": list(run["notices"]),
    }


def dump_results(results: dict[str, Any]) -> bytes:
    """The results as indented JSON bytes (NaN becomes null)."""
    return orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n"
