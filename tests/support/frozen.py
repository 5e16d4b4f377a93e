"""Hand-written, deterministic engine output for the app tests: nothing here depends on time."""

from __future__ import annotations

from dataclasses import replace

from tui.engine.config import LoadTarget
from tui.engine.snapshot import (
    ITL_CONVENTIONS,
    ClientHealth,
    Histogram,
    ItlConvention,
    Knee,
    LaneView,
    LevelView,
    RequestDetail,
    Snapshot,
    Stats,
)

EDGES_MS: tuple[float, ...] = tuple(round(0.1 * 10 ** (i / 10), 6) for i in range(61))
"""0.1 ms .. 100 s, ten log-spaced bins per decade."""


def _hist(centre_bin: int, spread: int, total: int, p50: float, p99: float) -> Histogram:
    counts = [0] * (len(EDGES_MS) - 1)
    weights = [spread + 1 - abs(k) for k in range(-spread, spread + 1)]
    scale = total / sum(weights)
    for k, w in zip(range(-spread, spread + 1), weights, strict=True):
        counts[centre_bin + k] = round(w * scale)
    n = sum(counts)
    return Histogram(
        edges_ms=EDGES_MS,
        counts=tuple(counts),
        stats=Stats(
            n=n,
            mean=p50 * 1.1,
            std=p50 / 3,
            min=p50 / 3,
            max=p99 * 1.2,
            p50=p50,
            p90=p50 * 1.6,
            p95=p50 * 1.8,
            p99=p99,
        ),
    )


def _stats(p50: float, p90: float, p99: float, n: int = 40) -> Stats:
    return Stats(
        n=n,
        mean=(p50 + p90) / 2,
        std=(p90 - p50) / 2,
        min=p50 / 2,
        max=p99 * 1.1,
        p50=p50,
        p90=p90,
        p95=(p90 + p99) / 2,
        p99=p99,
    )


def _level(
    level_id: int,
    users: int,
    tps: float,
    per_req: float,
    ttft: float,
    tpot: float,
    ended: float | None,
    failed: int = 0,
) -> LevelView:
    started = 10.0 * (level_id - 1)
    return LevelView(
        level_id=level_id,
        mode="concurrency",
        value=float(users),
        started_s=started,
        ended_s=ended,
        steady_from_s=started + 2.0,
        steady=ended is not None,
        completed=10 * users,
        failed=failed,
        output_tps=tps,
        request_per_s=tps / 128,
        per_request_tps=per_req,
        ttft=_stats(ttft, ttft * 1.5, ttft * 2.2),
        tpot=_stats(tpot, tpot * 1.2, tpot * 1.5),
        itl_chunk=_stats(tpot * 0.95, tpot * 1.3, tpot * 2.5),
        itl_e2e=_stats(tpot * 1.1, tpot * 1.3, tpot * 1.7),
        e2el=_stats(ttft + 127 * tpot, ttft + 140 * tpot, ttft + 170 * tpot),
        tokens_per_chunk=1.0,
        sched_lag=_stats(0.2, 0.5, 1.1),
        errors=(("http_500", failed),) if failed else (),
    )


LEVELS = (
    _level(1, 1, 48.0, 48.0, 95.0, 20.5, 10.0),
    _level(2, 2, 93.0, 46.5, 101.0, 21.0, 20.0),
    _level(3, 4, 176.0, 44.0, 118.0, 22.4, 30.0),
    _level(4, 8, 201.0, 25.1, 410.0, 38.9, None, failed=2),
)

LANES = (
    LaneView(
        request_id=301,
        level_id=4,
        state="streaming",
        text_tail="The quick brown fox jumps over the lazy dog while the server batches eight",
        output_tokens=74,
        age_s=3.1,
        ttft_ms=402.0,
        tokens_per_s=25.4,
    ),
    LaneView(
        request_id=302,
        level_id=4,
        state="streaming",
        text_tail="Once upon a time, in a rack far away,",
        output_tokens=12,
        age_s=0.9,
        ttft_ms=388.0,
        tokens_per_s=26.0,
    ),
    LaneView(
        request_id=303,
        level_id=4,
        state="waiting",
        text_tail="",
        output_tokens=0,
        age_s=0.2,
        ttft_ms=None,
        tokens_per_s=None,
    ),
    LaneView(
        request_id=299,
        level_id=4,
        state="ok",
        text_tail="and that is the end of the story.",
        output_tokens=128,
        age_s=5.4,
        ttft_ms=415.0,
        tokens_per_s=24.9,
    ),
    LaneView(
        request_id=298,
        level_id=4,
        state="error",
        text_tail="partial answ",
        output_tokens=3,
        age_s=1.7,
        ttft_ms=420.0,
        tokens_per_s=None,
        error="HTTP 500: simulated internal error",
    ),
    LaneView(
        request_id=304,
        level_id=4,
        state="streaming",
        text_tail="Lorem ipsum dolor sit amet, consectetur",
        output_tokens=40,
        age_s=1.9,
        ttft_ms=395.0,
        tokens_per_s=25.0,
    ),
)

WINDOWS = (10.0, 30.0, 60.0, None)


def snapshot(**changes: object) -> Snapshot:
    """The frozen snapshot: concurrency 8 after a 1, 2, 4, 8 ramp, knee at 4."""
    ttft = {w: _hist(36 + i, 2 + i, 60 * (i + 1), 401.0 + i, 880.0 + 10 * i) for i, w in enumerate(WINDOWS)}
    itl: dict[tuple[ItlConvention, float | None], Histogram] = {}
    for c_index, conv in enumerate(ITL_CONVENTIONS):
        for i, w in enumerate(WINDOWS):
            itl[(conv, w)] = _hist(25 + c_index + i % 2, 3, 500 * (i + 1), 38.0 + c_index, 95.0 + c_index)
    snap = Snapshot(
        seq=42,
        elapsed_s=37.5,
        base_url="http://127.0.0.1:8000/v1",
        model="sim-llama-8b",
        endpoint="chat",
        demo=True,
        load=LoadTarget(mode="concurrency", concurrency=8),
        level_id=4,
        in_flight=8,
        completed=148,
        failed=2,
        output_tps=198.7,
        request_per_s=1.55,
        lanes=LANES,
        lanes_hidden=4,  # in flight 8: four lanes shown, four not
        ttft_hist=ttft,
        itl_hist=itl,
        levels=LEVELS,
        knee=Knee(level_id=3, value=4.0, output_tps=176.0, peak_tps=201.0, rule="gain < 20% per doubling"),
        errors=(("http_500", 2),),
        recent_errors=(
            "req 298: HTTP 500: simulated internal error",
            "req 250: HTTP 500: simulated internal error",
        ),
        health=ClientHealth(workers=1, loop_lag_p99_ms=1.2, cpu_share=0.31),
    )
    return replace(snap, **changes)  # type: ignore[arg-type]


def detail(request_id: int) -> RequestDetail | None:
    lane = next((lane for lane in LANES if lane.request_id == request_id), None)
    if lane is None:
        return None
    offsets = tuple(400.0 + 25.0 * i for i in range(lane.output_tokens))
    return RequestDetail(
        request_id=lane.request_id,
        level_id=lane.level_id,
        state=lane.state,
        sent_s=30.0,
        ttft_ms=lane.ttft_ms,
        e2e_ms=offsets[-1] if offsets else None,
        input_tokens=128,
        output_tokens=lane.output_tokens,
        token_source="usage",
        chunk_offsets_ms=offsets,
        chunk_tokens=(1,) * len(offsets),
        itl_chunk=_stats(25.0, 27.0, 31.0, n=len(offsets)),
        tpot_ms=25.0 if offsets else None,
        http_status=500 if lane.state == "error" else 200,
        error_class="http_500" if lane.state == "error" else None,
        error=lane.error,
        text=lane.text_tail,
    )
