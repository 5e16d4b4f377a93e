"""The results JSON: per load level, the keys and meanings of ``vllm bench serve --save-result``, plus ours.

Per level (over its steady-state window; see `tui.engine.aggregate.metrics.steady_from_ns`): ``duration``,
``completed``, ``failed``, ``total_input_tokens``, ``total_output_tokens``, ``request_throughput``,
``output_throughput``, ``total_token_throughput``, ``request_goodput`` (with SLOs), and
``mean_/median_/std_/p50_/p90_/p95_/p99_`` x ``ttft/tpot/itl/e2el`` + ``_ms``. tokentop's own: the LLMPerf
ITL (``*_itl_e2e_ms``), ``tokens_per_chunk``, ``errors`` by class, scheduling lag, the window itself, the
achieved ``mean_input_tokens``/``mean_output_tokens``, time to first answer token (``*_ttfa_ms``) and
``mean_reasoning_tokens``.
Never contains the API key or header values.

Built from plain data only (a `RunInfo`, a `Snapshot`, the level views and a `ClientSummary`), never from
the live engine, so results can be rebuilt from a file or a replay; `tui.engine.host.results_file` reads
them back.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tui import __version__
from tui.engine.aggregate.levels import MIN_STEADY_REQUESTS, MIN_WINDOW_S
from tui.engine.aggregate.metrics import KNEE_RULE, KNEE_TOLERANCE
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.run_config import endpoint_path_record, isl_probe_record, workload_record
from tui.engine.secrets import display_url
from tui.engine.server_metrics.view import ServerView
from tui.engine.snapshot import LevelView, Snapshot, Stats

DEFINITIONS: dict[str, str] = {
    "ttft": "time to first token: first chunk with generated text (content or reasoning) minus request sent",
    "tpot": "time per output token excluding the first: (E2E - TTFT) / (output tokens - 1), per request",
    "itl": "inter-token latency as vLLM/SGLang: gaps between consecutive content chunks, all gaps pooled",
    "itl_e2e": "LLMPerf inter-token latency: E2E / output tokens, per request, TTFT included",
    "e2el": "end-to-end latency: end of stream minus request sent",
    "duration": "length in seconds of the level's window (the throughput denominator)",
    "steady_window": "one rule for the table, the curve, the results and a quit: the window starts at "
    "the steady start (once every request of earlier levels has ended and one median E2E of this level "
    "has passed; while it never got there, once every worker had applied the level) and ends at the "
    "level's end, but never past the send of a request whose chunks are not all known: one still in "
    "flight, or one cancelled at quit or Ctrl-C (its tokens are not counted and its time is not in the "
    "window). So every request sent inside the window has ended, and every chunk inside it is known",
    "steady": "the window starts at the steady start, lasts at least min_window_s and one median E2E, and "
    "holds at least min_steady_requests successful requests sent in it (the latency statistics' population)",
    "too_short": "the window is shorter than max(min_window_s, the level's median E2E), or no request of the "
    "level finished: the rates (request_throughput, output_throughput, total_token_throughput, "
    "request_goodput) are null, never 0 or an extrapolation",
    "completed": "successful requests sent in the window (the population of the latency stats)",
    "failed": "failed requests sent in the window",
    "output_throughput": "output tokens of successful requests' content chunks arriving in the window / "
    "duration (tokens per chunk from server usage)",
    "request_throughput": "successful requests ending in the window / duration",
    "total_token_throughput": "output_throughput plus input tokens of requests sent in the window / duration",
    "request_goodput": "requests ending in the window that met every SLO given / duration",
    "interrupted": "the run was cut short (interrupted_by: quit, SIGINT, SIGTERM, ...); its last level ends "
    "where the run stopped, under the window rule above",
    "tokens_per_chunk": "output tokens / content chunks, mean over requests (>1 with speculative decoding)",
    "per_request_output_throughput": "median over requests of (output tokens - 1) / (E2E - TTFT), tokens/s",
    "sched_lag": "open loop: actual send time minus scheduled arrival time",
    "histograms": "per level, counts of ttft, e2el and itl (vLLM's chunk gaps) in ms over exactly the "
    "population of its latency stats (the successful requests sent in the window, and their chunk gaps), "
    "in log-spaced bins [edges_ms[i], edges_ms[i+1]), 10 per decade, from the first to the last non-empty "
    "one; a value beyond 0.1 ms..100 s widens its end bin. The e2el counts sum to completed while "
    "exact_stats (else to the uniform sample the stats come from); ttft counts those with generated text",
    "output tokens": "server usage.completion_tokens when reported, else one per content chunk",
    "input tokens": "server usage.prompt_tokens when reported, else the requested input length",
    "prefix_cache_hit_rate": "cached_prompt_tokens (usage.prompt_tokens_details.cached_tokens, summed over "
    "the window's population) / the prompt tokens of the requests that reported it; null when none did",
    "knee": KNEE_RULE.format(tol=KNEE_TOLERANCE),
    "stats": "mean, std (population), median, and linear-interpolated percentiles, as numpy/vLLM",
    "server": "per level, the server's own /metrics over the level's steady window (its whole span when it "
    "has none): gauges time-averaged (running_mean, waiting_mean, kv_usage_mean), counters as rates, its "
    "latency histograms as quantiles from bucket deltas (ms); null when not scraped",
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


def level_result(lv: LevelView, extra: Mapping[str, Any], load_info: dict[str, Any]) -> dict[str, Any]:
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
            "too_short": lv.too_short,
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
        out["dropped_arrivals"] = lv.dropped
    # achieved lengths (compare with the run's workload isl/osl) and reasoning
    out["mean_input_tokens"] = _num(lv.mean_isl)
    out["mean_output_tokens"] = _num(lv.mean_osl)
    out["mean_reasoning_tokens"] = _num(lv.reasoning_tokens)
    out.update(_stats_keys("ttfa", lv.ttfa))
    # the server's prefix cache over the window's population; null when it did not report it
    out["cached_prompt_tokens"] = lv.cached_tokens
    out["prefix_cache_hit_rate"] = _num(lv.cache_hit_rate)
    return out


def safe_url(url: str) -> str:
    """The URL without any user:password part or query value (`tui.engine.secrets.display_url`)."""
    return display_url(url)


@dataclass(frozen=True)
class RunInfo:
    """What the results say about the run itself, as plain data: no engine object and no secret (the URL
    has no credentials, the headers only their names, the API key is not here at all)."""

    url: str
    """Server base URL, without any user:password part."""
    model: str
    endpoint: str
    workload: WorkloadConfig
    options: EngineOptions
    workers: int
    load: LoadTarget
    """The target when the results were taken (a rate level's arrival process and cap come from it)."""
    started_at_s: float
    """Wall-clock start of the run (``time.time()``)."""
    timeout_s: float
    header_names: tuple[str, ...] = ()
    extra_body: tuple[tuple[str, object], ...] = ()
    demo: bool = False
    endpoint_path: str | None = None
    """``--endpoint /PATH`` as `endpoint_path_record` keeps it (no query values, no key); None: the
    flavour's own path."""
    tool: str = "tokentop"
    version: str = __version__

    @classmethod
    def of(
        cls,
        target: TargetConfig,
        workload: WorkloadConfig,
        load: LoadTarget,
        *,
        options: EngineOptions,
        workers: int,
        model: str,
        started_at_s: float,
    ) -> RunInfo:
        """From the configs a face ran with: the secrets in ``target`` are left behind here."""
        return cls(
            url=safe_url(target.base_url),
            model=model,
            endpoint=target.endpoint,
            workload=workload,
            options=options,
            workers=workers,
            load=load,
            started_at_s=started_at_s,
            timeout_s=target.timeout_s,
            header_names=tuple(name for name, _ in target.headers),
            extra_body=target.extra_body,
            demo=target.demo,
            endpoint_path=endpoint_path_record(target.endpoint_path, target.api_key),
        )


@dataclass(frozen=True)
class ClientSummary:
    """The load generator's own health over the whole run."""

    max_loop_lag_p99_ms: float
    """Highest event-loop lag p99 any worker reported: raw, a momentary stall included."""
    max_cpu_share: float
    """Highest CPU share (of one core) any worker reported: raw."""
    saturated: bool
    """Sustained saturation at some point (`tui.engine.load.health.Sustain`)."""
    saturated_spans_s: tuple[tuple[float | None, float | None], ...] = ()
    """[from, to] run seconds while flagged (to None: until the end)."""
    notices: tuple[str, ...] = ()


def _histogram_keys(histograms: Mapping[int, Mapping[str, Any]] | None, level_id: int) -> dict[str, Any]:
    """A level's ``histograms`` key (ttft, e2el, itl: each ``edges_ms`` and ``counts``), if it has them."""
    mine = None if histograms is None else histograms.get(level_id)
    return {} if mine is None else {"histograms": {name: dict(h) for name, h in mine.items()}}


def build_results(
    info: RunInfo,
    snap: Snapshot,
    views: Sequence[tuple[LevelView, Mapping[str, Any]]],
    client: ClientSummary,
    *,
    interrupted: str | None = None,
    server: ServerSummary | None = None,
    histograms: Mapping[int, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The whole results document for what was measured so far, from plain data. ``views``: each level's
    view with its extras (``cancelled``, ``max_loop_lag_p99_ms``, ``max_cpu_share``). ``interrupted``: why
    the run was cut short ("quit", "SIGINT", ...), as the face that saw it says; None for a run that
    finished. ``server``: what the server's own /metrics said, per level and overall (None: not scraped).
    ``histograms``: per level id, its latency histograms over its window
    (`tui.engine.aggregate.level_histograms`); a level without any has no ``histograms`` key."""
    workload, options, load = info.workload, info.options, info.load
    knee = snap.knee
    levels = []
    for lv, extra in views:
        load_info: dict[str, Any] = {}
        if lv.mode == "rate":
            load_info = {"arrival": load.arrival, "max_concurrency": load.max_concurrency}
        level = level_result(lv, extra, load_info)
        if server is not None:
            level["server"] = server.levels.get(lv.level_id)
        level.update(_histogram_keys(histograms, lv.level_id))
        levels.append(level)
    peak = max((lv.output_tps for lv, _ in views if lv.steady and math.isfinite(lv.output_tps)), default=None)
    store_health = snap.health
    return {
        "tool": info.tool,
        "version": info.version,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(info.started_at_s)),
        "interrupted": interrupted is not None,
        "interrupted_by": interrupted,
        "target": {"url": safe_url(info.url), "model": info.model, "endpoint": info.endpoint},
        "config": {
            "isl": workload.isl,
            "osl": workload.osl,
            "fixed_osl": workload.fixed_osl,
            "seed": workload.seed,
            "timeout_s": info.timeout_s,
            "workers": info.workers,
            "header_names": list(info.header_names),
            "extra_body": dict(info.extra_body),
            "demo": info.demo,
            "endpoint_path": info.endpoint_path,
            "slo_ttft_ms": options.slo_ttft_ms,
            "slo_tpot_ms": options.slo_tpot_ms,
            "min_window_s": MIN_WINDOW_S,
            "min_steady_requests": MIN_STEADY_REQUESTS,
            "workload": workload_record(workload),
            "isl_probe": isl_probe_record(workload, options),
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
            "workers": info.workers,
            "max_loop_lag_p99_ms": client.max_loop_lag_p99_ms,
            "max_cpu_share": client.max_cpu_share,
            "lag_threshold_ms": options.lag_threshold_ms,
            "cpu_threshold": options.cpu_threshold,
            "health_window_s": options.health_window_s,
            "saturated": client.saturated,
            "saturated_spans_s": [list(span) for span in client.saturated_spans_s],
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
            "malformed_lines_skipped": snap.skipped_lines,
            "dropped_arrivals": sum(lv.dropped for lv, _ in views),
        },
        "fatal": snap.fatal,
        "notices": list(client.notices),
        "server": None if server is None else dict(server.run),
    }


@dataclass(frozen=True)
class ServerSummary:
    """The server's own view for results: each level's figures over its window
    (`tui.engine.server_metrics.view.ServerView.level_summary`) and the run's (url, kind, status, message)."""

    run: Mapping[str, Any]
    levels: Mapping[int, Mapping[str, Any]]


def dump_results(results: dict[str, Any]) -> bytes:
    """The results as indented JSON bytes (NaN becomes null)."""
    return orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n"


def write_results(results: dict[str, Any], path: Path) -> Path:
    """Write ``results`` to ``path`` atomically (a temporary file, then a rename): a crash never leaves
    half a file, and any engine, real or fake, writes the same bytes."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(dump_results(results))
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()  # a full disk or a failed rename leaves no stray half file beside the results
        raise
    return path


def server_summary(view: ServerView, per_level: Mapping[int, Mapping[str, Any]]) -> ServerSummary:
    """The run's server figures beside each level's (`ServerView.level_summary` over the level's steady
    window, its whole span when it has none: the same clock, ``perf_counter_ns``, stamps the scrapes and the
    requests, so they line up)."""
    run = {
        "url": safe_url(view.url),
        "kind": view.kind,
        "model": view.model,
        "status": view.status,
        "message": view.message,
        "scrapes": view.scrapes,
        "failures": view.failures,
        "found": list(view.found),
    }
    return ServerSummary(run=run, levels=dict(per_level))
