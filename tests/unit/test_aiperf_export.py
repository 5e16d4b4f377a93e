"""The AIPerf per-request export: each line a ``MetricRecordInfo`` as AIPerf documents it, from the run's
requests log, with the times on AIPerf's wall clock.

AIPerf's own model is not used: aiperf 0.13.0 pins textual 5 and rich 14, which this project's venv cannot
take beside textual 8. The schema below is written here from AIPerf 0.13's documented record
(``docs/tutorials/working-with-profile-exports.md`` and ``MetricRecordMetadata``/``MetricRecordInfo`` in
``aiperf/common/models/record_models.py``): the required metadata fields, a ``metrics`` map of
``{value, unit}``, and ``error`` null or ``{code, type, message}``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from tests.unit.results_data import frozen_results
from tui.engine.results.aiperf import RECORD_VERSION, RequestsLogError, aiperf_export
from tui.engine.results.model import Clock, Results

METRIC_VALUE = {
    "type": "object",
    "required": ["value", "unit"],
    "properties": {
        "value": {"anyOf": [{"type": "number"}, {"type": "array", "items": {"type": "number"}}]},
        "unit": {"type": "string"},
    },
    "additionalProperties": False,
}
AIPERF_RECORD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["metadata", "metrics", "error"],
    "additionalProperties": False,
    "properties": {
        "metadata": {
            "type": "object",
            "required": [
                "session_num",
                "request_start_ns",
                "request_end_ns",
                "worker_id",
                "record_processor_id",
                "benchmark_phase",
            ],
            "properties": {
                "session_num": {"type": "integer"},
                "x_request_id": {"type": ["string", "null"]},
                "x_correlation_id": {"type": ["string", "null"]},
                "conversation_id": {"type": ["string", "null"]},
                "turn_index": {"type": ["integer", "null"]},
                "request_start_ns": {"type": "integer"},
                "request_ack_ns": {"type": ["integer", "null"]},
                "request_end_ns": {"type": "integer"},
                "worker_id": {"type": "string"},
                "record_processor_id": {"type": "string"},
                "benchmark_phase": {"enum": ["warmup", "profiling"]},
                "was_cancelled": {"type": "boolean"},
                "cancellation_time_ns": {"type": ["integer", "null"]},
            },
            "additionalProperties": False,
        },
        "metrics": {"type": "object", "additionalProperties": METRIC_VALUE},
        "error": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["message"],
                    "properties": {
                        "code": {"type": ["integer", "null"]},
                        "type": {"type": ["string", "null"]},
                        "message": {"type": "string"},
                    },
                },
            ]
        },
    },
}
T0_PERF, T0_UNIX = 5_000_000_000, 1_700_000_000_000_000_000


def _results() -> Results:
    results = frozen_results()
    first = replace(results.levels[0], window_from_s=10.0, window_to_s=20.0)
    clock = Clock(perf_t0_ns=T0_PERF, unix_t0_ns=T0_UNIX)
    return replace(results, levels=(first, *results.levels[1:]), clock=clock)


def _log(results: Results) -> list[dict[str, Any] | None]:
    """Requests-log records as the engine writes them: one ok inside level 1's window, one ok before it,
    one failed, one cancelled, one of a level these results do not have, and a torn line."""
    level = results.levels[0]
    assert level.window_from_s is not None
    inside = T0_PERF + int((level.window_from_s + 0.1) * 1e9)
    before = T0_PERF + int(max(level.window_from_s - 0.5, 0.0) * 1e9)
    ok = {"id": 1, "client_request_id": "0-1", "level": level.level_id, "status": "ok", "http_status": 200,
          "sent_ns": inside, "first_byte_ns": inside + 20_000_000, "end_ns": inside + 500_000_000,
          "input_tokens": 64, "output_tokens": 5, "ttft_ms": 100.0, "reasoning_tokens": None,
          "chunk_ns": [inside + 100_000_000 + k * 100_000_000 for k in range(5)]}  # fmt: skip
    early = dict(ok, id=2, client_request_id="1-1", sent_ns=before, end_ns=before + 400_000_000)
    failed = {"id": 3, "client_request_id": "0-2", "level": level.level_id, "status": "error",
              "error_class": "http_5xx", "error": "HTTP 500", "http_status": 500, "sent_ns": inside + 1,
              "end_ns": inside + 2_000_000, "input_tokens": 64, "chunk_ns": []}  # fmt: skip
    cancelled = dict(failed, id=4, client_request_id="0-3", status="cancelled", error_class=None, error=None,
                     http_status=None)  # fmt: skip
    stranger = dict(ok, id=5, level=999)
    return [ok, early, failed, cancelled, stranger, None]


def test_each_request_is_aiperfs_record() -> None:
    results = _results()
    export = aiperf_export(results, _log(results))
    assert (len(export.lines), export.malformed, export.other_run) == (4, 1, 1)
    records = [orjson.loads(line) for line in export.lines]
    for rec in records:
        jsonschema.validate(rec, AIPERF_RECORD_SCHEMA)
        assert rec["metadata"]["record_processor_id"] == RECORD_VERSION
    assert [r["metadata"]["session_num"] for r in records] == [0, 1, 2, 3]  # in the order sent
    by_id = {r["metadata"]["x_request_id"]: r for r in records}
    ok = by_id["0-1"]
    assert (
        ok["metadata"]["benchmark_phase"] == "profiling"
        and by_id["1-1"]["metadata"]["benchmark_phase"] == "warmup"
    )
    sent = _log(results)[0]
    assert sent is not None
    assert ok["metadata"]["request_start_ns"] == sent["sent_ns"] - T0_PERF + T0_UNIX  # AIPerf's wall clock
    m = ok["metrics"]
    assert m["time_to_first_token"] == {"value": 100.0, "unit": "ms"}
    assert m["request_latency"] == {"value": 500.0, "unit": "ms"}
    assert m["inter_chunk_latency"]["value"] == pytest.approx([100.0] * 4)
    assert m["inter_token_latency"]["value"] == pytest.approx((500.0 - 100.0) / 4)  # AIPerf's ITL: our TPOT
    assert m["output_sequence_length"] == {"value": 5, "unit": "tokens"} and ok["error"] is None
    failed, cancelled = by_id["0-2"], records[-1]
    assert failed["error"] == {"code": 500, "type": "http_5xx", "message": "HTTP 500"}
    assert failed["metrics"] == {"error_isl": {"value": 64, "unit": "tokens"}}
    assert cancelled["metadata"]["was_cancelled"] is True and cancelled["error"]["code"] == 499


def test_results_without_a_clock_say_so() -> None:
    with pytest.raises(RequestsLogError, match="no clock"):
        aiperf_export(frozen_results(), [])


def test_the_subcommand_needs_the_requests_log(tmp_path: Path) -> None:
    from tests.support.engine_helpers import tokentop
    from tui.engine.results.files import write_results

    results = _results()
    saved = write_results(results, tmp_path / "run.json")
    base = ["export", str(saved), "--to", "aiperf"]
    r = tokentop(*base)
    assert r.returncode == 2 and "--requests-log" in r.stderr and len(r.stderr.splitlines()) == 1
    log = tmp_path / "requests.jsonl"
    log.write_bytes(
        b"".join(orjson.dumps(rec) + b"\n" for rec in _log(results) if rec is not None) + b"{torn"
    )
    out = tmp_path / "profile_export.jsonl"
    r = tokentop(*base, "--requests-log", str(log), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(out) and "1 malformed line(s) skipped" in r.stderr
    lines = out.read_bytes().splitlines()
    assert len(lines) == 4
    for line in lines:
        jsonschema.validate(orjson.loads(line), AIPERF_RECORD_SCHEMA)
