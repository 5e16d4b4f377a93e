"""The run as ``vllm bench serve`` writes its results, for the tools users already have: one JSON file per
level (``--save-result``), or every level as one line of one file (``--append-result``).

Values are tokentop's own per-level results, renamed only where vLLM names them differently; nothing is
recomputed here. vLLM's shape is taken from ``vllm/benchmarks/serve.py`` (``main_async`` builds
``result_json``: ``date``, ``endpoint_type``, ``backend``, ``label``, ``model_id``, ``tokenizer_id``,
``num_prompts``, ``request_rate``, ``burstiness``, ``max_concurrency``, then ``benchmark()``'s result:
``duration``, ``completed``, ``failed``, ``total_input_tokens``, ``total_output_tokens``,
``request_throughput``, ``request_goodput``, ``output_throughput``, ``total_token_throughput``,
``max_output_tokens_per_s``, ``max_concurrent_requests``, and per metric ``mean_/median_/std_/pNN_`` +
``_ms``). By default vLLM writes only ``p99`` and only for ``ttft``, ``tpot``, ``itl``; these files carry what
``--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,95,99`` would, a superset. vLLM has no
prefix-cache key, so the level's hit rate goes under ``tokentop_`` keys. With ``--append-result`` vLLM opens
the file for appending and writes each run's object with ``json.dump`` (one line), a newline before it when
the file is not empty.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tui.engine.results.files import write_atomic
from tui.engine.results.model import Level, Results, Stats

VLLM_SETUP_KEYS: tuple[str, ...] = (
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
)
"""The run's description, in vLLM's order."""
VLLM_RESULT_KEYS: tuple[str, ...] = (
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
)
"""`benchmark()`'s scalar results (its per-request lists are dropped unless ``--save-detailed``)."""
VLLM_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
VLLM_DEFAULT_PERCENTILES: tuple[int, ...] = (99,)
"""What ``--metric-percentiles`` defaults to in vLLM."""
VLLM_PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
"""What these files carry (tokentop's own percentiles): vLLM's default p99 among them."""
LABEL = "tokentop"
"""vLLM's ``label`` (``--label``, defaulting to the backend there); also the file names' prefix."""
_BACKENDS = {"chat": "openai-chat", "completions": "openai"}
"""tokentop's endpoint -> vLLM's backend for the same OpenAI route."""


def vllm_metric_keys() -> tuple[str, ...]:
    """The latency keys, named as vLLM's ``process_one_metric`` names them."""
    keys: list[str] = []
    for metric in VLLM_METRICS:
        keys += [f"mean_{metric}_ms", f"median_{metric}_ms", f"std_{metric}_ms"]
        keys += [f"p{p}_{metric}_ms" for p in VLLM_PERCENTILES]
    return tuple(keys)


def _level_date(results: Results, level: Level) -> str:
    """vLLM's ``date`` (``%Y%m%d-%H%M%S``) for when the level began: run start + the level's start."""
    fmt = "%Y%m%d-%H%M%S"
    try:
        start = datetime.strptime(results.started_at, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return datetime.now().strftime(fmt)
    return (start + timedelta(seconds=level.started_s or 0.0)).strftime(fmt)


def _traffic(level: Level) -> dict[str, Any]:
    """vLLM's ``request_rate``/``burstiness``/``max_concurrency`` for a level.

    Closed loop (N users) is vLLM's ``--request-rate inf --max-concurrency N``. Open loop: Poisson
    arrivals are vLLM's default ``burstiness`` 1.0; constant spacing is the limit of vLLM's gamma
    intervals as burstiness grows, which JSON cannot write (inf), so it is null there and named in
    ``tokentop_arrival``."""
    if level.mode == "concurrency":
        return {"request_rate": "inf", "burstiness": 1.0, "max_concurrency": level.concurrency}
    if level.mode == "trace":  # vLLM's trace replays have no one rate: the rate the level achieved
        return {
            "request_rate": level.request_throughput,
            "burstiness": None,
            "max_concurrency": level.max_concurrency,
        }
    arrival = level.arrival or "poisson"
    return {
        "request_rate": level.request_rate,
        "burstiness": 1.0 if arrival == "poisson" else None,
        "max_concurrency": level.max_concurrency,
    }


def _metric(level: Level, metric: str) -> Stats:
    return getattr(level, metric)  # type: ignore[no-any-return]


def vllm_level(results: Results, level: Level) -> dict[str, Any]:
    """One level as ``vllm bench serve --save-result`` writes one run: a flat object, vLLM's keys first
    (values from tokentop's results for that level), then a few ``tokentop_`` keys saying how to read them.

    ``num_prompts`` is the level's population (requests sent in its window, successful or not): the requests
    its statistics describe, as vLLM's are those of its ``num_prompts``."""
    endpoint = results.target.endpoint
    model = results.target.model
    out: dict[str, Any] = {
        "date": _level_date(results, level),
        "endpoint_type": _BACKENDS.get(endpoint, endpoint),
        "backend": _BACKENDS.get(endpoint, endpoint),
        "label": LABEL,
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": level.completed + level.failed,
    }
    out.update(_traffic(level))
    for key in VLLM_RESULT_KEYS:
        out[key] = getattr(level, key)
    for metric in VLLM_METRICS:
        stats = _metric(level, metric)
        for stat in ("mean", "median", "std", *(f"p{p}" for p in VLLM_PERCENTILES)):
            out[f"{stat}_{metric}_ms"] = getattr(stats, stat)
    out.update(
        {
            "tokentop_version": results.version,
            "tokentop_level_id": level.level_id,
            "tokentop_mode": level.mode,
            "tokentop_arrival": level.arrival,
            "tokentop_steady": level.steady,
            "tokentop_too_short": level.too_short,
            "tokentop_interrupted": results.interrupted,
            "tokentop_url": results.target.url,
            "tokentop_cached_prompt_tokens": level.cached_prompt_tokens,
            "tokentop_prefix_cache_hit_rate": level.prefix_cache_hit_rate,
        }
    )
    if level.measured_over == "arrivals":
        # vLLM counts completed requests only; these count tokens and samples of unfinished streams too, so
        # they go under tokentop's own keys and vLLM's stay null (manual: ``live``)
        out["tokentop_measured_over"] = "arrivals"
        for key in ("output_throughput", *(k for k in vllm_metric_keys() if "_ttft_" in k or "_itl_" in k)):
            out[f"tokentop_{key}"], out[key] = out[key], None
    return out


def vllm_records(results: Results) -> list[dict[str, Any]]:
    """Every level's `vllm_level`, in order."""
    return [vllm_level(results, level) for level in results.levels]


def _slug(text: str) -> str:
    """A file-name-safe piece (vLLM uses the model id's last path part)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.split("/")[-1]) or "model"


def vllm_file_name(record: dict[str, Any]) -> str:
    """vLLM's default name (``{label}-{request_rate}qps[-concurrency{N}]-{model}-{date}.json``), with the
    level id added so the levels of one run never share a name."""
    rate = record["request_rate"]
    conc = record.get("max_concurrency")
    conc_part = f"-concurrency{conc}" if conc is not None else ""
    return (
        f"{LABEL}-{rate}qps{conc_part}-{_slug(str(record['model_id']))}-{record['date']}"
        f"-level{record['tokentop_level_id']}.json"
    )


def write_vllm_results(results: Results, directory: Path) -> list[Path]:
    """One vLLM-shaped JSON file per level in ``directory`` (made if missing); the paths written. Each file is
    written whole or not at all (a temporary file, then a rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for record in vllm_records(results):
        path = directory / vllm_file_name(record)
        write_atomic(path, orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
        paths.append(path)
    return paths


def vllm_appended(results: Results, existing: bytes = b"") -> bytes:
    """``--append-result``'s layout: ``existing`` (the file so far), then each level's object on a line of
    its own, a newline before each unless the file was empty, as vLLM appends."""
    parts = [existing] if existing else []
    for record in vllm_records(results):
        if parts:
            parts.append(b"\n")
        parts.append(orjson.dumps(record))
    return b"".join(parts)


def append_vllm_results(results: Results, path: Path) -> Path:
    """Append every level to the one file ``path`` as ``vllm bench serve --append-result`` does (the file
    replaced whole, so a failure leaves it as it was)."""
    existing = path.read_bytes() if path.exists() else b""
    return write_atomic(path, vllm_appended(results, existing))
