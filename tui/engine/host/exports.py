"""Exports of a results document for the tools users already have: `vllm bench serve`-shaped JSON files, one
per level, and the level table as CSV.

Pure functions of the results dict that `tui.engine.host.results.build_results` makes (or a results file
read back), never of the live engine, so every face writes the same files and a saved run can be exported
again later. The values are tokentop's own per-level results, renamed only where vLLM names them
differently; nothing is recomputed here.

vLLM's shape is taken from ``vllm/benchmarks/serve.py`` (``main_async`` builds ``result_json``: ``date``,
``endpoint_type``, ``backend``, ``label``, ``model_id``, ``tokenizer_id``, ``num_prompts``, ``request_rate``,
``burstiness``, ``max_concurrency``, then ``benchmark()``'s result: ``duration``, ``completed``, ``failed``,
``total_input_tokens``, ``total_output_tokens``, ``request_throughput``, ``request_goodput``,
``output_throughput``, ``total_token_throughput``, and per metric ``mean_/median_/std_/pNN_`` + ``_ms``).
By default vLLM writes only ``p99`` and only for ``ttft``, ``tpot``, ``itl``; these files carry what
``--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,95,99`` would, a superset. vLLM
has no prefix-cache key (its result holds spec-decode stats, nothing on cached prompt tokens), so the
level's hit rate goes under ``tokentop_`` keys.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

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


def _level_date(results: Mapping[str, Any], level: Mapping[str, Any]) -> str:
    """vLLM's ``date`` (``%Y%m%d-%H%M%S``) for when the level began: run start + the level's start."""
    fmt = "%Y%m%d-%H%M%S"
    try:
        start = datetime.strptime(str(results.get("started_at", "")), "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return datetime.now().strftime(fmt)
    return (start + timedelta(seconds=float(level.get("started_s") or 0.0))).strftime(fmt)


def _traffic(level: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's ``request_rate``/``burstiness``/``max_concurrency`` for a level.

    Closed loop (N users) is vLLM's ``--request-rate inf --max-concurrency N``. Open loop: Poisson
    arrivals are vLLM's default ``burstiness`` 1.0; constant spacing is the limit of vLLM's gamma
    intervals as burstiness grows, which JSON cannot write (inf), so it is null there and named in
    ``tokentop_arrival``."""
    if level.get("mode") == "concurrency":
        return {"request_rate": "inf", "burstiness": 1.0, "max_concurrency": level.get("concurrency")}
    arrival = level.get("arrival", "poisson")
    return {
        "request_rate": level.get("request_rate"),
        "burstiness": 1.0 if arrival == "poisson" else None,
        "max_concurrency": level.get("max_concurrency"),
    }


def vllm_level(results: Mapping[str, Any], level: Mapping[str, Any]) -> dict[str, Any]:
    """One level as ``vllm bench serve --save-result`` writes one run: a flat object, vLLM's keys first
    (values from tokentop's results for that level), then a few ``tokentop_`` keys saying how to read them.

    ``num_prompts`` is the level's population (requests sent in its window, successful or not): the requests
    its statistics describe, as vLLM's are those of its ``num_prompts``."""
    target = results.get("target", {})
    endpoint = str(target.get("endpoint", "chat"))
    model = target.get("model") or ""
    out: dict[str, Any] = {
        "date": _level_date(results, level),
        "endpoint_type": _BACKENDS.get(endpoint, endpoint),
        "backend": _BACKENDS.get(endpoint, endpoint),
        "label": LABEL,
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": int(level.get("completed") or 0) + int(level.get("failed") or 0),
    }
    out.update(_traffic(level))
    for key in VLLM_RESULT_KEYS:
        out[key] = level.get(key)
    for key in vllm_metric_keys():
        out[key] = level.get(key)
    out.update(
        {
            "tokentop_version": results.get("version"),
            "tokentop_level_id": level.get("level_id"),
            "tokentop_mode": level.get("mode"),
            "tokentop_arrival": level.get("arrival"),
            "tokentop_steady": level.get("steady"),
            "tokentop_too_short": level.get("too_short", False),
            "tokentop_interrupted": results.get("interrupted", False),
            "tokentop_url": target.get("url"),
            "tokentop_cached_prompt_tokens": level.get("cached_prompt_tokens"),
            "tokentop_prefix_cache_hit_rate": level.get("prefix_cache_hit_rate"),
        }
    )
    if level.get("measured_over") == "arrivals":
        # vLLM counts completed requests only; these count tokens and samples of unfinished streams too, so
        # they go under tokentop's own keys and vLLM's stay null (manual: ``live``)
        out["tokentop_measured_over"] = "arrivals"
        for key in ("output_throughput", *(k for k in vllm_metric_keys() if "_ttft_" in k or "_itl_" in k)):
            out[f"tokentop_{key}"], out[key] = out[key], None
    return out


def _slug(text: str) -> str:
    """A file-name-safe piece (vLLM uses the model id's last path part)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.split("/")[-1]) or "model"


def vllm_file_name(record: Mapping[str, Any]) -> str:
    """vLLM's default name (``{label}-{request_rate}qps[-concurrency{N}]-{model}-{date}.json``), with the
    level id added so the levels of one run never share a name."""
    rate = record["request_rate"]
    conc = record.get("max_concurrency")
    conc_part = f"-concurrency{conc}" if conc is not None else ""
    return (
        f"{LABEL}-{rate}qps{conc_part}-{_slug(str(record['model_id']))}-{record['date']}"
        f"-level{record['tokentop_level_id']}.json"
    )


def write_vllm_results(results: Mapping[str, Any], directory: Path) -> list[Path]:
    """One vLLM-shaped JSON file per level in ``directory`` (made if missing); the paths written. Each file is
    written whole or not at all (a temporary file, then a rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for level in results.get("levels", []):
        record = vllm_level(results, level)
        path = directory / vllm_file_name(record)
        _write_atomic(path, orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
        paths.append(path)
    return paths


# --- CSV ----------------------------------------------------------------------------------------------


NOT_IN_CSV = frozenset({"histograms"})
"""Level keys left out of the CSV: bucket counts are no table cell (they are in the results JSON)."""


def _flat(level: Mapping[str, Any]) -> dict[str, Any]:
    """A level's keys as CSV cells: nested objects spread to ``parent.child`` columns, except ``errors``
    (its keys vary by level), which stays one JSON cell, and the `NOT_IN_CSV` keys."""
    out: dict[str, Any] = {}
    for key, value in level.items():
        if key in NOT_IN_CSV:
            continue
        if isinstance(value, Mapping) and key != "errors":
            for sub, v in value.items():
                out[f"{key}.{sub}"] = v
        else:
            out[key] = value
    return out


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping | Sequence) and not isinstance(value, str):
        return orjson.dumps(value).decode()
    return str(value)


def levels_csv(results: Mapping[str, Any]) -> str:
    """The level table: one row per level, the header the results' level keys (in their order, the union
    over levels: rate levels have a few more). A null (a rate too short to measure) is an empty cell."""
    rows = [_flat(level) for level in results.get("levels", [])]
    header: dict[str, None] = {}
    for row in rows:
        header.update(dict.fromkeys(row))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(header))
    for row in rows:
        writer.writerow([_cell(row.get(key)) for key in header])
    return buf.getvalue()


def write_csv(results: Mapping[str, Any], path: Path) -> Path:
    """Write `levels_csv` to ``path`` (whole or not at all)."""
    _write_atomic(path, levels_csv(results).encode())
    return path


def write_exports(
    results: Mapping[str, Any], *, vllm_dir: Path | None = None, csv_path: Path | None = None
) -> list[Path]:
    """The exports asked for (None: not that one); every path written."""
    written: list[Path] = []
    if vllm_dir is not None:
        written += write_vllm_results(results, vllm_dir)
    if csv_path is not None:
        written.append(write_csv(results, csv_path))
    return written


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
