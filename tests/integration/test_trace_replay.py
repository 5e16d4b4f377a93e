"""A trace replayed against the simulator, checked by its truth log (one clock, CLOCK_MONOTONIC): arrivals
at the trace's times, each request's ISL and OSL as the trace says by the server's count, shared leading
hash ids hitting the simulator's prefix cache, and speed x2 halving every gap."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from tests.support.engine_helpers import joined, running_handle, wait_for
from tui.engine.config import EngineOptions, LoadTarget, TraceConfig, WorkloadConfig
from tui.engine.traces import check_trace
from tui.sim.launch import SimServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.timing]
BLOCK = 64
N = 48
TEMPLATE = 7
"""The simulator's chat template tokens around one message (tests/support/sim_client.py)."""
CACHE_BLOCK = 16
"""The simulator's prefix cache holds whole blocks of this many tokens."""


def write_trace(path: Path) -> list[dict[str, object]]:
    """Requests 15-60 ms apart; prompts of 1-3 blocks drawn from a few block chains, so some share their
    leading blocks with earlier ones and some share none."""
    rng = random.Random(7)
    rows = []
    t_ms = 1_000.0
    for i in range(N):
        chain = rng.randrange(4)
        blocks = rng.randint(1, 3)
        ids = [100 * chain + b for b in range(blocks)] if i % 5 else [10_000 + i, 20_000 + i]
        isl = BLOCK * (len(ids) - 1) + rng.randint(8, BLOCK)
        rows.append({"timestamp": round(t_ms, 3), "input_length": isl, "output_length": rng.randint(2, 12),
                     "hash_ids": ids})  # fmt: skip
        t_ms += rng.uniform(15, 60)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def shared_tokens(row: dict[str, object], earlier: list[dict[str, object]]) -> int:
    """Leading prompt tokens of its own text ``row`` shares with any earlier request: its leading blocks
    alike, as far as both prompts reach (the chat template's tokens around the text not counted)."""
    ids, isl = list(row["hash_ids"]), int(row["input_length"])  # type: ignore[call-overload]
    best = 0
    for other in earlier:
        o_ids, o_isl = list(other["hash_ids"]), int(other["input_length"])  # type: ignore[call-overload]
        k = 0
        while k < min(len(ids), len(o_ids)) and ids[k] == o_ids[k]:
            k += 1
        best = max(best, min(k * BLOCK, isl - TEMPLATE, o_isl - TEMPLATE))
    return best


def test_a_trace_replays_at_its_times_lengths_and_prefixes(tmp_path: Path) -> None:
    rows = write_trace(tmp_path / "trace.jsonl")
    trace = check_trace(TraceConfig(path=str(tmp_path / "trace.jsonl"), block_size=BLOCK))
    truth_log = tmp_path / "truth.jsonl"
    workload = WorkloadConfig(trace=trace)
    with (
        SimServer("small-gpu", time_scale=20, truth_log=truth_log) as sim,
        running_handle(sim.url, LoadTarget(mode="trace", speed=1.0), tmp_path, workload=workload, workers=2,
                       options=EngineOptions(isl_probe=True)) as handle,
    ):  # fmt: skip
        wait_for(handle, lambda s: s.completed + s.failed >= N and s.in_flight == 0, 60, "the first pass")
        handle.set_load(LoadTarget(mode="trace", speed=2.0, from_start=True))
        wait_for(handle, lambda s: s.completed + s.failed >= 2 * N and s.in_flight == 0, 60, "the x2 pass")
        snap = handle.snapshot()
    assert snap.failed == 0 and [lv.value for lv in snap.levels] == [1.0, 2.0]
    pairs = joined(tmp_path / "requests.jsonl", truth_log)
    assert len(pairs) == 2 * N
    at_ms = np.array([float(r["timestamp"]) for r in rows])  # type: ignore[arg-type]
    passes = {}
    for level, speed in ((1, 1.0), (2, 2.0)):
        mine = sorted((p for p in pairs if p[0]["level"] == level), key=lambda p: p[0]["scheduled_ns"])
        assert len(mine) == N
        sched = np.array([rec["scheduled_ns"] for rec, _ in mine], dtype=np.int64)
        arrival = np.array([tr["arrival_ns"] for _, tr in mine], dtype=np.int64)
        # the schedule is the trace's, gaps divided by the speed (to the nanosecond's rounding)
        want_ms = (at_ms - at_ms[0]) / speed
        assert np.abs((sched - sched[0]) / 1e6 - want_ms).max() < 1e-3
        late_ms = (arrival - sched) / 1e6
        assert late_ms.min() >= 0, "a request reached the server before its time"
        # the send stamp is the request's going out, so the server cannot have read it earlier
        early = [
            (rec["sent_ns"] - tr["arrival_ns"]) / 1e6 for rec, tr in mine if rec["sent_ns"] > tr["arrival_ns"]
        ]
        assert not early, (
            f"{len(early)} requests stamped sent after the server read them, by up to {max(early):.3f} ms"
        )
        passes[level] = (mine, arrival, late_ms)
        # ISL and OSL per request as the trace says, by the server's count
        for (rec, tr), row in zip(mine, rows, strict=True):
            assert tr["prompt_tokens"] == rec["input_tokens"] == row["input_length"], row
            assert tr["completion_tokens"] == rec["output_tokens"] == row["output_length"], row
    # leading hash ids shared with a request that arrived before are served from the simulator's prefix
    # cache: every whole cache block of the text both share hits, nothing much past it (unshared: nothing)
    earlier: list[dict[str, object]] = []
    by_arrival = sorted(zip(passes[1][0], rows, strict=True), key=lambda p: p[0][1]["arrival_ns"])
    for (_, tr), row in by_arrival:
        shared = shared_tokens(row, earlier)
        cached = tr["cached_tokens"] or 0
        assert CACHE_BLOCK * (shared // CACHE_BLOCK) <= cached <= shared + CACHE_BLOCK, (row, shared, cached)
        earlier.append(row)
    assert sum(1 for (_, tr) in passes[1][0] if (tr["cached_tokens"] or 0) >= BLOCK) >= N // 4
    # the server saw the requests on time: median lateness under 2 ms (checked last: the bound most at the
    # mercy of a busy machine, and the checks above say more when it fails). No p99 bound: this runs beside
    # five other test processes on two cores, and with only one more core kept busy, 20 runs
    # (tests/perf/trace_arrivals.py --busy) read a pass's p99 under 2 ms in 90% of passes, worst 2.9 ms.
    # Every late request is a thread waiting in the run queue (manual: traces); the 2 ms p99 target is the
    # benchmark's, which prints whether it is met. A schedule off by a gap, or gaps not divided by the
    # speed, reads tens of ms here.
    for level in (1, 2):
        late_ms = passes[level][2]
        median = np.median(late_ms)
        assert median < 2.0, f"level {level}: arrival vs schedule median {median:.2f} ms"
    # x2 halves every gap as the server saw it: over each stretch of half the trace (24 requests, ~0.9 s at
    # x1) the second pass's arrivals span half the first's. The median of the 24 ratios: the schedule is
    # exact (above), and a ratio of one stretch moves only by its two ends' lateness, a few ms in 900 (not
    # each gap's own: beside the Ray tests one pass read the gaps' median difference 3.3 ms, while its
    # lateness median stayed under 2). With both cores kept busy four runs read 0.49999-0.50007; gaps not
    # divided by the speed read 1.0.
    half = N // 2
    span1 = passes[1][1][half:] - passes[1][1][:-half]
    span2 = passes[2][1][half:] - passes[2][1][:-half]
    ratio = float(np.median(span2 / span1))
    assert ratio == pytest.approx(0.5, abs=0.002), ratio
