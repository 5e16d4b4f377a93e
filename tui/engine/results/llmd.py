"""The run as llm-d's *Benchmark Report* v0.2 (llm-d-benchmark's standard format, read by its analysis tools
and dashboards): one report per load level, as llm-d writes one per load point.

Client figures go under ``results.request_performance.aggregate`` (requests, latency, throughput, each a
``Statistics`` with ``units``); the server's own /metrics over the level's window go under
``results.observability``: the gauges the schema names (KV-cache usage, prefix-cache hit rate, running and
waiting requests) in ``components[0].aggregate``, and every figure tokentop scraped under ``tokentop_server``
(the schema leaves ``observability`` open for such keys). A figure tokentop did not measure is left out (the
schema's fields are optional; a ``Statistics`` needs a mean). Nothing is recomputed here.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tui.engine.results.codec import encode
from tui.engine.results.files import to_json, write_atomic
from tui.engine.results.model import Level, Results, Stats, Workload

REPORT_VERSION = "0.2"
"""The Benchmark Report revision written (llm-d reads the whole 0.2 line)."""
_PERCENTILES = ("p50", "p90", "p95", "p99")


def _stats(units: str, s: Stats | None) -> dict[str, Any] | None:
    """A ``Statistics`` from a metric's stats, or None without a mean (no samples)."""
    if s is None or s.mean is None:
        return None
    out: dict[str, Any] = {"units": units, "mean": s.mean}
    if s.std is not None:
        out["stddev"] = s.std
    for name in ("min", *_PERCENTILES, "max"):
        value = getattr(s, name)
        if value is not None:
            out[name] = value
    return out


def _value(units: str, value: float | None) -> dict[str, Any] | None:
    """A ``Statistics`` of one figure (a level's rate is one number over its window)."""
    return None if value is None else {"units": units, "mean": value}


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _times(results: Results, level: Level) -> dict[str, str] | None:
    """The level's window as ISO times and an ISO 8601 duration, from the run's start."""
    try:
        start = datetime.strptime(results.started_at, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return None
    begin = level.window_from_s if level.window_from_s is not None else level.started_s
    end = level.window_to_s if level.window_to_s is not None else level.ended_s
    out = {}
    if begin is not None:
        out["start"] = (start + timedelta(seconds=begin)).isoformat()
    if end is not None:
        out["end"] = (start + timedelta(seconds=end)).isoformat()
    if level.duration is not None:
        out["duration"] = f"PT{level.duration:.3f}S"
    return out or None


def _load(results: Results, level: Level) -> dict[str, Any]:
    """``scenario.load``: what tokentop sent (its own settings verbatim under ``native``)."""
    config = results.config
    workload = config.workload or Workload()
    source = "sampled" if workload.dataset else "random"
    fixed_isl = not workload.isl_dist and not workload.scenarios
    fixed_osl = config.fixed_osl and not workload.osl_dist and not workload.scenarios
    standardized: dict[str, Any] = {
        "tool": "tokentop",
        "tool_version": results.version,
        "parallelism": max(1, config.workers),
        "source": source,
        "input_seq_len": {"distribution": "fixed" if fixed_isl else "other", "value": config.isl},
        "output_seq_len": {"distribution": "fixed" if fixed_osl else "other", "value": config.osl},
    }
    if level.mode in ("rate", "trace"):
        # a trace's rate is its own: the rate the level achieved
        standardized["rate_qps"] = level.request_rate if level.mode == "rate" else level.request_throughput
        if level.max_concurrency is not None:
            standardized["concurrency"] = level.max_concurrency
    else:
        standardized["concurrency"] = level.concurrency
    return {
        "metadata": {"schema_version": "0.0.1", "cfg_id": f"tokentop-{results.started_at}"},
        "standardized": standardized,
        "native": {"config": to_json(results)["config"]},
    }


def _observability(results: Results, level: Level) -> dict[str, Any] | None:
    """The server's scrapes over the level's window: the schema's resource gauges, and all of them."""
    server = level.server
    if server is None:
        return None
    aggregate = _drop_none(
        {
            "kv_cache_usage": _value("fraction", server.kv_usage_mean),
            "cache_hit_rate": _value("fraction", server.prefix_cache_hit_rate),
            "running_requests": _value("count", server.running_mean),
            "waiting_requests": _value("count", server.waiting_mean),
        }
    )
    label = str((results.server or {}).get("kind") or server.kind or "server")
    component: dict[str, Any] = {"component_label": label}
    if aggregate:
        component["aggregate"] = aggregate
    return {"components": [component], "tokentop_server": encode(server)}


def llmd_report(results: Results, level: Level) -> dict[str, Any]:
    """One level as a Benchmark Report v0.2 (a plain dict, ready for JSON or YAML)."""
    requests = _drop_none(
        {
            "total": level.completed + level.failed,
            "failures": level.failed,
            "incomplete": level.cancelled,
            "input_length": _value("count", level.mean_input_tokens),
            "output_length": _value("count", level.mean_output_tokens),
        }
    )
    latency = _drop_none(
        {
            "time_to_first_token": _stats("ms", level.ttft),
            "normalized_time_per_output_token": _stats("ms/token", level.itl_e2e),
            "time_per_output_token": _stats("ms/token", level.tpot),
            "inter_token_latency": _stats("ms/token", level.itl),
            "request_latency": _stats("ms", level.e2el),
        }
    )
    input_rate = None
    if level.total_token_throughput is not None and level.output_throughput is not None:
        input_rate = level.total_token_throughput - level.output_throughput
    throughput = _drop_none(
        {
            "input_token_rate": _value("tokens/s", input_rate),
            "output_token_rate": _value("tokens/s", level.output_throughput),
            "total_token_rate": _value("tokens/s", level.total_token_throughput),
            "request_rate": _value("queries/s", level.request_throughput),
        }
    )
    run = _drop_none(
        {
            "uid": f"tokentop-{results.started_at}-level{level.level_id}",
            "eid": f"tokentop-{results.started_at}",
            "time": _times(results, level),
            "description": f"tokentop {level.name} against {results.target.model} at {results.target.url}",
            "keywords": ["tokentop", level.mode],
        }
    )
    return {
        "version": REPORT_VERSION,
        "run": run,
        "scenario": {"load": _load(results, level)},
        "results": _drop_none(
            {
                "request_performance": {
                    "aggregate": {"requests": requests, "latency": latency, "throughput": throughput}
                },
                "observability": _observability(results, level),
            }
        ),
    }


def llmd_reports(results: Results) -> list[dict[str, Any]]:
    """Every level's report, in order."""
    return [llmd_report(results, level) for level in results.levels]


def llmd_file_name(results: Results, level: Level) -> str:
    stamp = re.sub(r"[^0-9A-Za-z]+", "", results.started_at) or "run"
    return f"benchmark_report-tokentop-{stamp}-level{level.level_id}.json"


def write_llmd_reports(results: Results, directory: Path) -> list[Path]:
    """One report per level in ``directory`` (made if missing), each written whole or not at all."""
    directory.mkdir(parents=True, exist_ok=True)
    return [
        write_atomic(
            directory / llmd_file_name(results, level), orjson.dumps(report, option=orjson.OPT_INDENT_2)
        )
        for level, report in zip(results.levels, llmd_reports(results), strict=True)
    ]
