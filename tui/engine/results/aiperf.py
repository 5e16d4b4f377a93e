"""The run's requests as AIPerf's per-request ``profile_export.jsonl``: one ``MetricRecordInfo`` per line
(``metadata``, ``metrics``, ``error``), the record ``aiperf plot`` and AIPerf's own parsers read.

The per-request figures are not in the results file (it holds each level's summary): they come from the run's
``--requests-log``, whose stamps the results' ``clock`` turns into the wall-clock nanoseconds AIPerf writes. A
request sent inside its level's window (the population of the level's statistics) is in AIPerf's ``profiling``
phase; one sent outside it (the ramp up to steady state, the tail) is ``warmup``. Metrics follow AIPerf's
names and display units: ``inter_token_latency`` is AIPerf's (tokentop's TPOT) and ``inter_chunk_latency`` the
chunk gaps (tokentop's ITL). Versioned by `RECORD_VERSION`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson

from tui.engine.results.files import write_atomic
from tui.engine.results.model import Level, Results

RECORD_VERSION = "tokentop-aiperf-1"
"""This export's layout, written into each record's ``record_processor_id``: AIPerf's ``MetricRecordInfo``
as AIPerf 0.13 documents it (``docs/tutorials/working-with-profile-exports.md``)."""


class RequestsLogError(ValueError):
    """The per-request records cannot be had; the message is one line saying why and what to pass."""


@dataclass(frozen=True)
class AiperfExport:
    """The lines to write, and what was left out (said to the user)."""

    lines: tuple[bytes, ...]
    malformed: int = 0
    """Lines of the requests log that were not a JSON object (a torn last line after a crash)."""
    other_run: int = 0
    """Records of levels these results do not have (a log appended to by another run)."""


def read_requests_log(path: Path) -> Iterator[dict[str, Any] | None]:
    """Each line of a ``--requests-log`` as an object, None for a line that is not one."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RequestsLogError(f"{path}: cannot read the requests log: {exc.strerror or exc}") from None
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            yield None
            continue
        yield value if isinstance(value, dict) else None


def _mv(value: Any, unit: str) -> dict[str, Any]:
    return {"value": value, "unit": unit}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _in_window(level: Level, sent_s: float) -> bool:
    lo, hi = level.window_from_s, level.window_to_s
    return lo is not None and hi is not None and lo <= sent_s < hi


def aiperf_record(
    rec: Mapping[str, Any], level: Level, session_num: int, perf_t0_ns: int, unix_t0_ns: int
) -> dict[str, Any]:
    """One requests-log record as AIPerf's ``MetricRecordInfo``."""
    sent, end = int(rec["sent_ns"]), int(rec.get("end_ns") or rec["sent_ns"])
    wall = unix_t0_ns - perf_t0_ns
    first_byte = _int(rec.get("first_byte_ns"))
    status = rec.get("status")
    cancelled = status == "cancelled"
    metadata = {
        "session_num": session_num,
        "x_request_id": str(rec.get("client_request_id") or rec.get("id")),
        "x_correlation_id": None,
        "conversation_id": None,
        "turn_index": 0,
        "request_start_ns": sent + wall,
        "request_ack_ns": None if first_byte is None else first_byte + wall,
        "request_end_ns": end + wall,
        "worker_id": f"tokentop_worker_{str(rec.get('client_request_id', '0-0')).split('-')[0]}",
        "record_processor_id": RECORD_VERSION,
        "benchmark_phase": "profiling" if _in_window(level, (sent - perf_t0_ns) / 1e9) else "warmup",
        "was_cancelled": cancelled,
        "cancellation_time_ns": end + wall if cancelled else None,
    }
    isl = _int(rec.get("input_tokens"))
    if status != "ok":
        error = {
            "code": _int(rec.get("http_status")) or (499 if cancelled else None),
            "type": str(rec.get("error_class") or status),
            "message": str(rec.get("error") or status),
        }
        failed = {} if isl is None else {"error_isl": _mv(isl, "tokens")}
        return {"metadata": metadata, "metrics": failed, "error": error}
    osl = _int(rec.get("output_tokens"))
    chunks = [int(c) for c in rec.get("chunk_ns") or ()]
    metrics: dict[str, Any] = {}
    if isl is not None:
        metrics["input_sequence_length"] = _mv(isl, "tokens")
    ttft = rec.get("ttft_ms")
    if isinstance(ttft, int | float):
        metrics["time_to_first_token"] = _mv(float(ttft), "ms")
    e2e_ms = (end - sent) / 1e6
    metrics["request_latency"] = _mv(e2e_ms, "ms")
    if osl is not None:
        metrics["output_token_count"] = _mv(osl, "tokens")
        metrics["output_sequence_length"] = _mv(osl, "tokens")
    if len(chunks) > 1:
        gaps = [(b - a) / 1e6 for a, b in pairwise(chunks)]
        metrics["inter_chunk_latency"] = _mv(gaps, "ms")
    if isinstance(ttft, int | float) and osl is not None and osl > 1:
        itl = (e2e_ms - float(ttft)) / (osl - 1)
        metrics["inter_token_latency"] = _mv(itl, "ms")
        if itl > 0:
            metrics["output_token_throughput_per_user"] = _mv(1000.0 / itl, "tokens/sec/user")
    reasoning = _int(rec.get("reasoning_tokens"))
    if reasoning is not None:
        metrics["reasoning_token_count"] = _mv(reasoning, "tokens")
    return {"metadata": metadata, "metrics": metrics, "error": None}


def aiperf_export(results: Results, records: Iterable[dict[str, Any] | None]) -> AiperfExport:
    """The requests of ``results``' levels as AIPerf records, in the order they were sent;
    `RequestsLogError` when the results have no clock (a file from before it was saved)."""
    if results.clock is None:
        raise RequestsLogError(
            "these results have no clock (written before tokentop saved one): the requests' times cannot be "
            "placed; re-run, or export --to vllm/csv/llmd"
        )
    levels = {lv.level_id: lv for lv in results.levels}
    kept: list[dict[str, Any]] = []
    malformed = other = 0
    for rec in records:
        if rec is None or _int(rec.get("sent_ns")) is None:
            malformed += 1
        elif rec.get("canary"):
            continue  # the canary user's requests are in no level (`tui.engine.host.canary`)
        elif rec.get("level") not in levels:
            other += 1
        else:
            kept.append(rec)
    kept.sort(key=lambda r: int(r["sent_ns"]))
    clock = results.clock
    lines = tuple(
        orjson.dumps(aiperf_record(rec, levels[rec["level"]], i, clock.perf_t0_ns, clock.unix_t0_ns))
        for i, rec in enumerate(kept)
    )
    return AiperfExport(lines=lines, malformed=malformed, other_run=other)


def write_aiperf(results: Results, requests_log: Path, path: Path) -> AiperfExport:
    """Write ``profile_export.jsonl`` at ``path`` from ``requests_log`` (whole or not at all)."""
    export = aiperf_export(results, read_requests_log(requests_log))
    write_atomic(path, b"".join(line + b"\n" for line in export.lines))
    return export
