"""Per-load-level aggregation: finished records folded into each level's `LevelAgg`, and the level's summary
(`LevelView`), steady window included."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate import metrics as m
from tui.engine.aggregate.attainment import slo_view
from tui.engine.aggregate.binned_log import BinnedLog
from tui.engine.aggregate.intervals import rate_ci
from tui.engine.aggregate.saturation import send_shortfall
from tui.engine.aggregate.series import Reservoir, Timeline
from tui.engine.config import LoadTarget
from tui.engine.records import RequestRecord
from tui.engine.snapshot import LevelView

LEVEL_REQUEST_CAP = 20_000
"""Successful requests kept exactly per level; beyond it a uniform reservoir of this size."""
LEVEL_GAP_CAP = 200_000
"""Chunk gaps kept exactly per level; beyond it a uniform reservoir of this size."""
MIN_STEADY_REQUESTS = 5
"""A steady window is trusted once this many successful requests were sent in it (the population of its
latency statistics) and it is long enough to measure (`MIN_WINDOW_S`)."""
MIN_WINDOW_S = 1.0
"""A window shorter than max(this, the level's median E2E) is too short to measure: no rates (NaN, null in
the results, "-" in the table, no curve point). Below one E2E a closed loop's requests end in waves, so a
short window can hold two waves' ends (a 9-user level of 1 s requests read 40 and 90 req/s over 0.1 s)."""


_REQ_COLUMNS: dict[str, Any] = {
    "sent_ns": np.int64,
    "end_ns": np.int64,
    "ttft_ms": np.float64,
    "e2e_ms": np.float64,
    "tpot_ms": np.float64,
    "itl_e2e_ms": np.float64,
    "tpc": np.float64,
    "decode_tps": np.float64,
    "sched_lag_ms": np.float64,
    "ttfa_ms": np.float64,
    "reasoning_tokens": np.float64,
    "isl": np.float64,
    "osl": np.float64,
    "cached_tokens": np.float64,
}
_GAP_COLUMNS: dict[str, Any] = {"sent_ns": np.int64, "gap_ms": np.float64}

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass
class LevelAgg:
    """Everything kept about one load level."""

    level_id: int
    target: LoadTarget
    start_ns: int
    end_ns: int | None = None
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    dropped: int = 0
    """Open-loop arrivals the workers dropped while holding off a failing server (never sent)."""
    cancelled_sent_ns: int | None = None
    """Send stamp of the earliest request of this level that was cancelled (at quit): its chunks are not
    all known, so the level's window ends before it, exactly as it did while it was in flight."""
    last_end_ns: int | None = None
    errors: Counter[str] = field(default_factory=Counter)
    max_lag_ms: float = 0.0
    max_cpu: float = 0.0
    version: int = 0
    applied_ns: dict[int, int] = field(default_factory=dict)
    """When each worker applied this level (its load really starts then: a worker may still be starting)."""
    first_token_count: int = 0
    """Streams of this level that have had their first content chunk (from the workers' arrivals)."""
    users_started_ns: int | None = None
    """When the level's users all had a first token (a closed loop's ``concurrency`` streams, an open loop's
    `MIN_STEADY_REQUESTS`): one half of the arrivals' steady start (`tui.engine.aggregate.level_arrivals`)."""
    workers_lost: int = 0
    """Workers lost mid-level (their node went away): the window ends at the loss (`lost_at_ns`)."""
    lost_at_ns: int | None = None
    req: Reservoir = field(init=False)
    gaps: Reservoir = field(init=False)
    timeline: Timeline = field(init=False)
    ttft_log: BinnedLog = field(init=False)
    """Every TTFT of this level by arrival (in-flight streams included), binned."""
    gap_log: BinnedLog = field(init=False)
    """Every chunk gap of this level by arrival, binned."""

    def __post_init__(self) -> None:
        self.req = Reservoir(LEVEL_REQUEST_CAP, _REQ_COLUMNS, seed=self.level_id)
        self.gaps = Reservoir(LEVEL_GAP_CAP, _GAP_COLUMNS, seed=self.level_id + 1)
        self.timeline = Timeline(self.start_ns)
        self.ttft_log = BinnedLog()
        self.gap_log = BinnedLog()

    def first_tokens(self, t_ns: int, n: int) -> None:
        """``n`` more streams of this level had their first token by ``t_ns``."""
        if n <= 0:
            return
        self.first_token_count += n
        users = (
            max(1, int(np.ceil(self.target.value)))
            if self.target.mode == "concurrency"
            else MIN_STEADY_REQUESTS
        )
        if self.users_started_ns is None and self.first_token_count >= users:
            self.users_started_ns = t_ns

    def count(self, rec: RequestRecord) -> None:
        """Count one finished request of this level (the successful ones' figures come from `fold_ok`)."""
        self.version += 1
        self.last_end_ns = max(self.last_end_ns or 0, rec.end_ns)
        if rec.status == "ok":
            self.completed += 1
        elif rec.status == "cancelled":
            self.cancelled += 1
            sent = rec.sent_ns
            self.cancelled_sent_ns = (
                sent if self.cancelled_sent_ns is None else min(self.cancelled_sent_ns, sent)
            )
        else:
            self.failed += 1
            klass = rec.error_class or "client"
            self.errors[klass] += 1
            self.timeline.add(Timeline.SENT_FAIL, np.array([rec.sent_ns], dtype=np.int64))


@dataclass(frozen=True)
class OkColumns:
    """A batch of successful records as numpy columns (one row per request, and one per chunk or gap)."""

    levels: IntArray
    sent: IntArray
    end: IntArray
    first_t: IntArray
    """When TTFT was measured: the first content chunk, or the end for a request without content."""
    isl: FloatArray
    osl: FloatArray
    sched_lag_ms: FloatArray
    ttfa_ms: FloatArray
    """Time to first answer token; NaN without answer text."""
    reasoning_tokens: FloatArray
    """NaN where the server did not report them."""
    cached_tokens: FloatArray
    """Prompt tokens served from the server's prefix cache; NaN where it did not say."""
    fig: m.RequestFigures
    chunk_t: IntArray
    """Every request's chunk stamps, request after request."""
    chunk_w: FloatArray
    """Tokens in each of those chunks."""
    chunk_arrived_w: FloatArray
    """Tokens the workers' arrivals already counted for each chunk: the server's per-chunk count, else one
    (so ``chunk_w - chunk_arrived_w`` corrects a level's arrivals to the usage total once a stream ends)."""
    chunk_level: IntArray
    gaps_ms: FloatArray
    """Gaps between consecutive chunks of one request."""
    gap_t: IntArray
    """When each gap closed."""
    gap_sent: IntArray
    """When the gap's request was sent (a level's steady window selects on it)."""
    gap_level: IntArray


def ok_columns(recs: Sequence[RequestRecord]) -> OkColumns:
    """The columns of ``recs`` (all successful): vectorised, with no numpy call per request, as this runs
    for every finished request."""
    n = len(recs)
    sent = np.fromiter((r.sent_ns for r in recs), dtype=np.int64, count=n)
    first = np.fromiter(
        (r.first_content_ns if r.first_content_ns is not None else np.nan for r in recs),
        dtype=np.float64,
        count=n,
    )
    end = np.fromiter((r.end_ns for r in recs), dtype=np.int64, count=n)
    osl = np.fromiter((r.output_tokens or 0 for r in recs), dtype=np.float64, count=n)
    isl = np.fromiter((r.input_tokens or 0 for r in recs), dtype=np.float64, count=n)
    nch = np.fromiter((len(r.chunk_ns) for r in recs), dtype=np.float64, count=n)
    sched = np.fromiter(
        ((r.sent_ns - r.scheduled_ns) / 1e6 if r.scheduled_ns is not None else np.nan for r in recs),
        dtype=np.float64,
        count=n,
    )
    levels = np.fromiter((r.level_id for r in recs), dtype=np.int64, count=n)
    ttfa = np.fromiter(
        ((r.first_answer_ns - r.sent_ns) / 1e6 if r.first_answer_ns is not None else np.nan for r in recs),
        dtype=np.float64,
        count=n,
    )
    reasoning = np.fromiter(
        (r.reasoning_tokens if r.reasoning_tokens is not None else np.nan for r in recs),
        dtype=np.float64,
        count=n,
    )
    cached = np.fromiter(
        (r.cached_tokens if r.cached_tokens is not None else np.nan for r in recs),
        dtype=np.float64,
        count=n,
    )
    fig = m.request_figures(sent, first, end, osl, nch)
    # Every request's chunk stamps in one array; gaps are diffs within a request.
    lens = nch.astype(np.int64)
    ct = np.frombuffer(b"".join(r.chunk_ns.tobytes() for r in recs), dtype=np.int64)
    owner = np.repeat(np.arange(n), lens)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_chunk = np.where((lens > 0) & (osl > 0), osl / lens, 1.0)
    cw = per_chunk[owner]
    arrived = np.ones(cw.size, dtype=np.float64)
    # the server's per-chunk counts where a request has one for each chunk, all at once (no call per request)
    counted = [r.chunk_tokens is not None and len(r.chunk_tokens) == len(r.chunk_ns) for r in recs]
    if any(counted):
        joined = b"".join([r.chunk_tokens.tobytes() for r, c in zip(recs, counted, strict=True) if c])  # type: ignore[union-attr]
        mask = np.asarray(counted)[owner]
        cw[mask] = arrived[mask] = np.frombuffer(joined, dtype=np.int64)
    same = owner[1:] == owner[:-1]
    gap_owner = owner[1:][same]
    return OkColumns(
        levels=levels,
        sent=sent,
        end=end,
        first_t=np.where(np.isnan(first), end, np.nan_to_num(first)).astype(np.int64),
        isl=isl,
        osl=osl,
        sched_lag_ms=sched,
        ttfa_ms=ttfa,
        reasoning_tokens=reasoning,
        cached_tokens=cached,
        fig=fig,
        chunk_t=ct,
        chunk_w=cw,
        chunk_arrived_w=arrived,
        chunk_level=levels[owner],
        gaps_ms=(np.diff(ct)[same]).astype(np.float64) / 1e6,
        gap_t=ct[1:][same],
        gap_sent=sent[gap_owner],
        gap_level=levels[gap_owner],
    )


def fold_ok(cols: OkColumns, levels: Mapping[int, LevelAgg]) -> None:
    """Add successful requests' rows, chunk gaps and timeline counts to their levels."""
    fig = cols.fig
    for level_id in np.unique(cols.levels).tolist():
        lv = levels.get(level_id)
        if lv is None:
            continue
        s = cols.levels == level_id
        lv.req.add(
            {
                "sent_ns": cols.sent[s],
                "end_ns": cols.end[s],
                "ttft_ms": fig.ttft_ms[s],
                "e2e_ms": fig.e2e_ms[s],
                "tpot_ms": fig.tpot_ms[s],
                "itl_e2e_ms": fig.itl_e2e_ms[s],
                "tpc": fig.tokens_per_chunk[s],
                "decode_tps": fig.decode_tps[s],
                "sched_lag_ms": cols.sched_lag_ms[s],
                "ttfa_ms": cols.ttfa_ms[s],
                "reasoning_tokens": cols.reasoning_tokens[s],
                "isl": cols.isl[s],
                "osl": cols.osl[s],
                "cached_tokens": cols.cached_tokens[s],
            }
        )
        gsel = cols.gap_level == level_id
        lv.gaps.add({"sent_ns": cols.gap_sent[gsel], "gap_ms": cols.gaps_ms[gsel]})
        tl = lv.timeline
        csel = cols.chunk_level == level_id
        tl.add(Timeline.TOK_OK, cols.chunk_t[csel], cols.chunk_w[csel])
        fix = cols.chunk_w[csel] - cols.chunk_arrived_w[csel]
        if fix.any():
            tl.add(Timeline.TOK, cols.chunk_t[csel], fix)
        tl.add(Timeline.END_OK, cols.end[s])
        tl.add(Timeline.SENT_OK, cols.sent[s])
        tl.add(Timeline.SENT_IN, cols.sent[s], cols.isl[s])
        tl.add(Timeline.SENT_OUT, cols.sent[s], cols.osl[s])


@dataclass(frozen=True)
class LevelContext:
    """What a level's steady window depends on beyond the level's own data."""

    now_ns: int
    horizon_ns: int
    """No unreported data before this: min over workers of their last batch time."""
    in_flight: int
    oldest_in_flight_ns: int | None
    earlier_in_flight: int
    earlier_last_end_ns: int | None
    acked: bool
    """Every worker has applied this level (so requests of earlier levels are all known)."""
    settled: bool = False
    """The level has ended and every request of it and of the levels before is known: its view is final."""


def window_end_ns(
    level_end_ns: int, horizon_ns: int, oldest_in_flight_ns: int | None, cancelled_sent_ns: int | None
) -> int:
    """Where a level's window ends: at the level's end, but never past the last complete data (the workers'
    horizon) nor past the send of a request whose chunks are not all known, whether it is still in flight
    or was cancelled at quit. So the window a face shows live and the one saved after `q` (or Ctrl-C) are
    the same rule: every chunk inside the window belongs to a request that has ended."""
    end = min(level_end_ns, horizon_ns)
    for cap in (oldest_in_flight_ns, cancelled_sent_ns):
        if cap is not None:
            end = min(end, cap)
    return end


def measurable(duration_s: float, median_e2e_ns: float | None) -> bool:
    """A window long enough for rates: at least max(`MIN_WINDOW_S`, the level's median E2E), and some
    request of the level has finished (else the median, and so the bound, is unknown)."""
    if median_e2e_ns is None or not np.isfinite(median_e2e_ns):
        return False
    return duration_s >= max(MIN_WINDOW_S, median_e2e_ns / 1e9)


def _median_e2e_ns(rows: Mapping[str, npt.NDArray[Any]], level_end_ns: int | None) -> float | None:
    """The level's median E2E, which sets its steady start and the shortest window it can measure: once the
    level has ended, of the requests that had ended by then. So an ended level's window stays put: its
    requests still in flight at the load change end later, slower under the next load, and would otherwise
    push the start (a level judged steady turned unsteady after it ended)."""
    e2e = rows["e2e_ms"] if level_end_ns is None else rows["e2e_ms"][rows["end_ns"] <= level_end_ns]
    return float(np.median(e2e)) * 1e6 if e2e.size else None


def level_view(
    lv: LevelAgg,
    ctx: LevelContext,
    t0_ns: int,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    slo_e2e_ms: float | None = None,
) -> tuple[LevelView, dict[str, Any]]:
    """The summary of one level, plus the extra figures the results JSON wants."""
    rows = lv.req.view()
    median_e2e_ns = _median_e2e_ns(rows, lv.end_ns)
    # The transient starts when the last worker applied the level, not when the face asked for it.
    applied = max([lv.start_ns, *lv.applied_ns.values()])
    steady_from = m.steady_from_ns(
        applied,
        median_e2e_ns,
        ctx.earlier_in_flight if ctx.acked else max(1, ctx.earlier_in_flight),
        ctx.earlier_last_end_ns,
    )
    end = ctx.now_ns if lv.end_ns is None else lv.end_ns
    if lv.lost_at_ns is not None:
        end = min(end, lv.lost_at_ns)
    win_end = window_end_ns(end, ctx.horizon_ns, ctx.oldest_in_flight_ns, lv.cancelled_sent_ns)
    in_window = steady_from is not None and steady_from < win_end
    # Never steady: the window starts when the load did (the first level's workers take a second or two to
    # start, and that wait is no part of the level's throughput).
    win_start = steady_from if steady_from is not None and in_window else applied
    tl = lv.timeline
    b0, b1 = tl.align(win_start, win_end)
    a_from, a_to = tl.edge_ns(b0), tl.edge_ns(b1)
    duration_s = (a_to - a_from) / 1e9
    # The population: successful requests sent inside the (aligned) window. The window ends before every
    # request not known to have ended, so each of these has ended: none is missing, whatever its length.
    sel = (rows["sent_ns"] >= a_from) & (rows["sent_ns"] < a_to)
    gap_rows = lv.gaps.view()
    gaps = gap_rows["gap_ms"][(gap_rows["sent_ns"] >= a_from) & (gap_rows["sent_ns"] < a_to)]
    pick = {k: v[sel] for k, v in rows.items()}
    # every chunk inside this window belongs to a request that has ended: its exact stamps and usage count
    tokens = tl.total(Timeline.TOK_OK, b0, b1)
    ended_ok = tl.total(Timeline.END_OK, b0, b1)
    sent_in_window_in = tl.total(Timeline.SENT_IN, b0, b1)
    completed = round(tl.total(Timeline.SENT_OK, b0, b1))
    failed = round(tl.total(Timeline.SENT_FAIL, b0, b1))
    in_tokens = round(sent_in_window_in)
    out_tokens = round(tl.total(Timeline.SENT_OUT, b0, b1))
    measured = measurable(duration_s, median_e2e_ns)
    nan = float("nan")
    per_s = (lambda x: x / duration_s) if measured else (lambda x: nan)
    steady = bool(in_window and measured and completed >= MIN_STEADY_REQUESTS)
    decode = pick["decode_tps"]
    decode = decode[~np.isnan(decode)]
    tpc = pick["tpc"]
    tpc = tpc[~np.isnan(tpc)]
    objectives = (slo_ttft_ms, slo_tpot_ms, slo_e2e_ms)
    slo = slo_view(
        pick,
        ok=completed,
        failed=failed,
        cut=lv.cancelled,
        window_s=duration_s,
        measured=measured,
        slo=objectives,
    )
    view = LevelView(
        level_id=lv.level_id,
        mode=lv.target.mode,
        value=lv.target.value,
        started_s=(lv.start_ns - t0_ns) / 1e9,
        ended_s=None if lv.end_ns is None else (lv.end_ns - t0_ns) / 1e9,
        steady_from_s=None if steady_from is None else (steady_from - t0_ns) / 1e9,
        steady=steady,
        completed=lv.completed,
        failed=lv.failed,
        output_tps=per_s(tokens),
        output_tps_ci=rate_ci(tl.b[Timeline.TOK_OK, b0:b1], tl.res_ns, per_s(tokens)),
        request_per_s=per_s(ended_ok),
        per_request_tps=float(np.median(decode)) if decode.size else float("nan"),
        ttft=m.stats(pick["ttft_ms"]),
        tpot=m.stats(pick["tpot_ms"]),
        itl_chunk=m.stats(gaps),
        coalesced_gaps=int(np.count_nonzero(gaps == 0)),
        itl_e2e=m.stats(pick["itl_e2e_ms"]),
        e2el=m.stats(pick["e2e_ms"]),
        tokens_per_chunk=float(tpc.mean()) if tpc.size else float("nan"),
        sched_lag=m.stats(pick["sched_lag_ms"]),
        send_shortfall=_send_shortfall(lv, pick, (a_from, a_to), completed + failed),
        errors=tuple(sorted(lv.errors.items())),
        window_s=duration_s,
        window_from_s=(a_from - t0_ns) / 1e9,
        window_to_s=(a_to - t0_ns) / 1e9,
        window_completed=completed,
        window_failed=failed,
        input_tokens=in_tokens,
        output_tokens=out_tokens,
        total_tps=per_s(tokens + sent_in_window_in),
        goodput_per_s=None if slo is None else slo.goodput_rps,
        slo=slo,
        in_flight=ctx.in_flight,
        settled=ctx.settled,
        exact=lv.req.exact and lv.gaps.exact,
        too_short=not measured,
        dropped=lv.dropped,
        workers_lost=lv.workers_lost,
        **_lengths(pick, in_tokens, out_tokens, completed),
        **_prefix_cache(pick),
    )
    extra = {"max_loop_lag_p99_ms": lv.max_lag_ms, "max_cpu_share": lv.max_cpu, "cancelled": lv.cancelled}
    return view, extra


def _send_shortfall(
    lv: LevelAgg, pick: Mapping[str, Any], window_ns: tuple[int, int], sends: int
) -> float | None:
    """An uncapped open loop's sends short of its schedule over the window (`send_shortfall`); with a cap a
    send also waits for a free slot, the server's doing, so it is not the client's sign."""
    load, workers = lv.target, max(1, len(lv.applied_ns))  # a constant schedule's step is one a worker
    if load.mode == "concurrency" or load.max_concurrency is not None:
        return None
    rate, constant = (load.rate, load.arrival == "constant") if load.mode == "rate" else (None, False)
    lag = pick["sched_lag_ms"]
    return send_shortfall(pick["sent_ns"], lag, window_ns, sends, rate, constant=constant, workers=workers)


def _lengths(
    pick: Mapping[str, FloatArray], in_tokens: int, out_tokens: int, completed: int
) -> dict[str, Any]:
    """A level's achieved mean ISL and OSL (to set against what was asked), its time to first answer token,
    and its mean reasoning tokens where reported."""
    reasoning = pick["reasoning_tokens"]
    reasoning = reasoning[~np.isnan(reasoning)]
    return {
        "mean_isl": in_tokens / completed if completed else float("nan"),
        "mean_osl": out_tokens / completed if completed else float("nan"),
        "ttfa": m.stats(pick["ttfa_ms"]),
        "reasoning_tokens": float(reasoning.mean()) if reasoning.size else float("nan"),
    }


def _prefix_cache(pick: Mapping[str, FloatArray]) -> dict[str, Any]:
    """Prompt tokens the server served from its prefix cache over the window's population, and the hit rate
    (cached / prompt tokens of the requests it reported them for); None when it reported none."""
    cached = pick["cached_tokens"]
    said = ~np.isnan(cached)
    if not said.any():
        return {"cached_tokens": None, "cache_hit_rate": None}
    total = float(cached[said].sum())
    prompt = float(pick["isl"][said].sum())
    return {"cached_tokens": round(total), "cache_hit_rate": total / prompt if prompt > 0 else None}


def length_mismatch(view: LevelView, isl: int | None, osl: int | None, tolerance: float = 2.0) -> str | None:
    """One line when a settled level's achieved mean ISL or OSL is more than ``tolerance`` tokens off what
    was asked (``isl`` or ``osl`` None: that length has no one target, or was left to the model: not
    checked); else None."""
    if not (view.steady or view.ended_s is not None) or view.window_completed == 0:
        return None
    off = []
    if isl is not None and abs(view.mean_isl - isl) > tolerance:
        off.append(f"mean ISL {view.mean_isl:.1f} (asked {isl})")
    if osl is not None and abs(view.mean_osl - osl) > tolerance:
        off.append(f"mean OSL {view.mean_osl:.1f} (asked {osl})")
    if not off:
        return None
    unit = {"concurrency": "users", "trace": "x speed"}.get(view.mode, "req/s")
    return f"level {view.level_id} ({view.value:g} {unit}): " + ", ".join(off) + " by the server's count"
