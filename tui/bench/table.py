"""What `tokentop bench` prints at the end of a run: one row per level, then the knee, errors and warnings.
A pure function of the final snapshot, so a test reads the text without running a load."""

from __future__ import annotations

import math
from collections.abc import Mapping

from tui.bench.progress import load_label
from tui.engine.aggregate.attainment import any_slo, capacity_level
from tui.engine.aggregate.cost import usd_per_mtok
from tui.engine.aggregate.metrics import why_no_knee
from tui.engine.config import EngineOptions
from tui.engine.snapshot import LevelView, Snapshot
from tui.units import dollars, ms_figure


def format_table(
    levels: tuple[LevelView, ...],
    cost_per_hour: float | None = None,
    joules: Mapping[int, float] | None = None,
    api: str = "chat",
    server_hits: Mapping[int, float | None] | None = None,
) -> str:
    """The end-of-run table (stdout); ``cost_per_hour``: a $/Mtok column after out tok/s; ``joules``: J per
    output token by level id (the results' ``server.gpu``), a column after it where any level has one;
    ``server_hits``: each level's prefix-cache hit rate by the server's counters (the results'
    ``server.prefix_cache_hit_rate``), shown where the requests gave no ``cached_tokens``. Embeddings
    (``api``) have no output: their own table (`embeddings_table`)."""
    if api == "embeddings":
        return embeddings_table(levels)
    # A reasoning model's answer starts after its thinking: time to first answer token gets a column then
    # (not for a server that reports 0 reasoning tokens, as vLLM's Responses API does for every model).
    reasoning = any(math.isfinite(lv.reasoning_tokens) and lv.reasoning_tokens > 0 for lv in levels)
    cols: tuple[str, ...] = ("level", "done", "fail", "ISL", "OSL", "req/s", "out tok/s", "TTFT p50",
                             "TTFT p99", "TPOT p50", "ITL p50", "ITL p99", "E2E p50", "± lag",
                             "tok/chunk", "steady")  # fmt: skip
    # A server that reports cached prompt tokens gets the prefix-cache hit rate (cached / prompt tokens).
    hits = {lv.level_id: hit_rate(lv, (server_hits or {}).get(lv.level_id)) for lv in levels}
    cached = any(rate is not None for rate in hits.values())
    # With an SLO: the share of the window's requests that met it, its Wilson 95 % interval, and the output
    # tok/s of those requests (goodput), beside the throughput it is a share of.
    slo = any(lv.slo is not None for lv in levels)
    if reasoning:
        cols = (*cols[:9], "TTFA p50", *cols[9:])
    if cached:
        cols = (*cols[:-1], "prefix cache", cols[-1])
    if joules:  # beside the throughput it is per
        cols = (*cols[:7], "J/tok", *cols[7:])
    if cost_per_hour is not None:  # beside the throughput it prices
        cols = (*cols[:7], "$/Mtok out", *cols[7:])
    if slo:
        cols = (*cols[:7], "SLO met (95% CI) goodput", *cols[7:])
    rows: list[tuple[str, ...]] = [cols]
    for lv in levels:
        name = table_name(lv)

        def fig(metric: str, q: str, lv: LevelView = lv) -> str:
            return _fig(lv, metric, q)

        lengths = tuple(f"{x:.1f}" if math.isfinite(x) else "-" for x in (lv.mean_isl, lv.mean_osl))
        row: tuple[str, ...] = (
            name,
            str(lv.window_completed),
            str(lv.window_failed),
            *lengths,
            f"{lv.request_per_s:.2f}" if math.isfinite(lv.request_per_s) else "-",
            f"{lv.output_tps:,.0f}" if math.isfinite(lv.output_tps) else "-",
            fig("ttft", "p50"),
            fig("ttft", "p99"),
            fig("tpot", "p50"),
            fig("itl_chunk", "p50"),
            fig("itl_chunk", "p99"),
            fig("e2el", "p50"),
            "-" if lv.client_lag_ms is None else f"{lv.client_lag_ms:.1f}",
            f"{lv.tokens_per_chunk:.2f}" if math.isfinite(lv.tokens_per_chunk) else "-",
            "yes" if lv.steady else "no",
        )
        if reasoning:
            row = (*row[:9], ms_figure(lv.ttfa.p50), *row[9:])
        if cached:
            rate = hits[lv.level_id]  # as the app's column: "warm" where unshared prompts hit the cache
            hit = "-" if rate is None else f"{rate:.0%}" + (" warm" if lv.warm_cache else "")
            row = (*row[:-1], hit, row[-1])
        if joules:
            j = joules.get(lv.level_id)
            row = (*row[:7], "-" if j is None else f"{j:.3g}", *row[7:])
        if cost_per_hour is not None:
            row = (*row[:7], dollars(usd_per_mtok(cost_per_hour, lv.output_tps)), *row[7:])
        if slo:
            row = (*row[:7], slo_cell(lv), *row[7:])
        rows.append(row)
    return "\n".join(
        [
            *_aligned(rows),
            "(over each level's steady window: done and fail count the requests sent in it; latencies in ms,"
            " ISL/OSL mean tokens by the server's count; ~ too few samples to bound a percentile; ± lag: the"
            " client's timing bound, its loop lag p99; * a figure it is 5 % or more of"
            + ("; SLO met: the share of requests that met every objective, failures against" if slo else "")
            + ")",
        ]
    )


def embeddings_table(levels: tuple[LevelView, ...]) -> str:
    """The end-of-run table of an embeddings run: requests and input tokens per second and the latency of a
    whole answer; no OSL, TTFT or ITL columns, as an embedding has no output to time."""
    cols = ("level", "done", "fail", "ISL", "req/s", "in tok/s", "lat p50", "lat p90", "lat p99", "± lag")
    rows: list[tuple[str, ...]] = [(*cols, "steady")]
    for lv in levels:
        rows.append(
            (
                table_name(lv),
                str(lv.window_completed),
                str(lv.window_failed),
                f"{lv.mean_isl:.1f}" if math.isfinite(lv.mean_isl) else "-",
                f"{lv.request_per_s:.2f}" if math.isfinite(lv.request_per_s) else "-",
                f"{lv.input_tps:,.0f}" if math.isfinite(lv.input_tps) else "-",
                _fig(lv, "e2el", "p50"),
                _fig(lv, "e2el", "p90"),
                _fig(lv, "e2el", "p99"),
                "-" if lv.client_lag_ms is None else f"{lv.client_lag_ms:.1f}",
                "yes" if lv.steady else "no",
            )
        )
    return "\n".join(
        [
            *_aligned(rows),
            "(embeddings, over each level's steady window: done and fail count the requests sent in it; lat:"
            " request sent to whole answer, ms; ISL mean tokens by the server's count, in tok/s of the"
            " requests sent in it; ~ too few samples to bound a percentile; ± lag: the client's timing"
            " bound)",
        ]
    )


def _fig(lv: LevelView, metric: str, q: str) -> str:
    """A latency percentile: ``~`` too few samples to bound it; ``*`` the timing bound is material."""
    stats = getattr(lv, metric)
    mark = "*" if f"{metric}_{q}" in lv.timing_uncertain else ""
    return ("~" if stats.unbounded(q) else "") + ms_figure(getattr(stats, q)) + mark


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """The rows in columns (the first left-aligned), a rule under the header."""
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = []
    for k, r in enumerate(rows):
        lines.append(
            "  ".join(v.rjust(w) if c else v.ljust(w) for c, (v, w) in enumerate(zip(r, widths, strict=True)))
        )
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def slo_cell(lv: LevelView) -> str:
    """ "97% (93-99) 812": the share that met the SLO, its Wilson 95 % interval, goodput tok/s (as the app's
    column); "-" before any request."""
    s = lv.slo
    if s is None or not s.requests:
        return "-"
    goodput = f"{s.goodput_tps:,.0f}" if math.isfinite(s.goodput_tps) else "-"
    return f"{s.attainment:.0%} ({s.low * 100:.0f}-{s.high * 100:.0f}) {goodput}"


def capacity_line(levels: tuple[LevelView, ...], target: float) -> str | None:
    """ "capacity at SLO: 4 users, 880 tok/s (...)": the highest load whose attainment's 95 % lower bound met
    ``target``, and its goodput; None without an SLO."""
    if not any(lv.slo is not None for lv in levels):
        return None
    rule = f"the highest load whose attainment's 95 % lower bound met {target * 100:g} %"
    best = capacity_level(levels, target)
    if best is None or best.slo is None:
        return f"capacity at SLO: none of the levels ({rule}: none did)"
    tps = best.slo.goodput_tps
    goodput = f"{tps:,.0f} tok/s" if math.isfinite(tps) else "- tok/s"
    return f"capacity at SLO: {load_label(best.mode, best.value)}, {goodput} ({rule})"


def hit_rate(lv: LevelView, by_counters: float | None) -> float | None:
    """A level's prefix-cache hit rate: the requests' ``cached_tokens`` first, else the server's counters."""
    for rate in (lv.cache_hit_rate, by_counters):
        if rate is not None and math.isfinite(rate):
            return rate
    return None


def table_name(lv: LevelView) -> str:
    """A level as the table's first column names it: "c=8", "r=2.5/s", "x2"."""
    if lv.mode == "trace":
        return f"x{lv.value:g}"
    return f"c={lv.value:g}" if lv.mode == "concurrency" else f"r={lv.value:g}/s"


def summary(
    snap: Snapshot,
    options: EngineOptions | None = None,
    joules: Mapping[int, float] | None = None,
    server_hits: Mapping[int, float | None] | None = None,
    late: Mapping[int, int] | None = None,
) -> str:
    """The table and, under it, the knee, the capacity at an SLO and its price, the errors and every warning
    the run had: what bench prints. ``options``: the run's price and SLO; ``joules``, ``server_hits``:
    `format_table`'s; ``late``: each level's late scrapes of ``/metrics``."""
    cost = None if options is None else options.cost_per_hour
    lines = [format_table(snap.levels, cost, joules, snap.endpoint, server_hits)]
    if snap.endpoint == "embeddings":
        pass  # the knee is read on output throughput, which embeddings have none of
    elif snap.knee is not None:
        mode, v = snap.load.mode, snap.knee.value
        at = f"speed x{v:g}" if mode == "trace" else f"{v:g} {'users' if mode == 'concurrency' else 'req/s'}"
        lines.append(
            f"knee: {at} ({snap.knee.output_tps:,.0f} output tok/s of a {snap.knee.peak_tps:,.0f} peak)"
        )
    elif len(snap.levels) > 1:
        lines.append(f"knee: not found {no_knee_reason(snap.levels)}")
    capacity = capacity_line(snap.levels, 0.95 if options is None else options.slo_target)
    if capacity is not None:
        lines.append(capacity)
    if (
        options is not None
        and cost is not None
        and any_slo(options.slo_ttft_ms, options.slo_tpot_ms, options.slo_e2e_ms)
    ):
        lines.append(price_at_slo(snap.levels, cost, options.slo_target))
    lags = [
        f"{table_name(lv)} p50 {lv.sched_lag.p50:.2f} p99 {lv.sched_lag.p99:.2f}" + behind(lv)
        for lv in snap.levels
        if lv.mode != "concurrency" and lv.sched_lag.n
    ]
    if lags:
        lines.append("send vs schedule (ms, never in TTFT): " + "; ".join(lags))
    if snap.errors:  # the whole run, so more than the table's fail column (its steady windows only)
        failed = sum(v for _, v in snap.errors)
        lines.append(
            f"errors over the whole run, warm-up and wind-down included ({failed} failed): "
            + ", ".join(f"{k} {v}" for k, v in snap.errors)
        )
    dropped = sum(lv.dropped for lv in snap.levels)
    if dropped:
        lines.append(
            f"dropped: {dropped} arrivals, due while the server's failures held the open loop (never sent)"
        )
    for lv in snap.levels:
        if lv.down_s > 0:
            up = f"{lv.window_s - lv.down_s:.1f} s" if lv.window_s > lv.down_s else "none"
            lines.append(
                f"{table_name(lv)}: not steady: the server was down {lv.down_s:.1f} s of its window;"
                f" its rates are over the time it was up ({up})"
                + ("; goodput too, and the SLO attainment counts its failed requests" if lv.slo else "")
            )
    if late:
        by_level = ", ".join(f"level {i}: {n}" for i, n in sorted(late.items()))
        lines.append(
            f"late scrapes of /metrics ({by_level}): those levels' server figures are up to seconds old"
        )
    if snap.health.saturated:
        lines.append("warning: " + snap.health.reason)
    lines.extend("warning: " + notice for notice in snap.notices)
    return "\n".join(lines)


def price_at_slo(levels: tuple[LevelView, ...], cost_per_hour: float, slo_target: float) -> str:
    """ "$/Mtok at SLO: $0.61 at 8 users (…)": the capacity level's price of a million output tokens that
    met the SLO (`tui.engine.aggregate.attainment.capacity_level`)."""
    best = capacity_level(levels, slo_target)
    if best is None:
        return f"$/Mtok at SLO: - (no level's attainment had a 95 % lower bound of {slo_target:.0%} or more)"
    good = None if best.slo is None else best.slo.goodput_tps
    at = load_label(best.mode, best.value)
    price = dollars(usd_per_mtok(cost_per_hour, good))
    return f"$/Mtok at SLO: {price} at {at}, the capacity at SLO (of its output tokens that met it)"


def behind(lv: LevelView) -> str:
    """How far an uncapped open level's sends fell behind their schedule, once it is 1 % or more."""
    short = lv.send_shortfall
    return f" ({short:.0%} behind)" if short is not None and short >= 0.01 else ""


def no_knee_reason(levels: tuple[LevelView, ...]) -> str:
    """What follows "knee: not found", in the words of what the levels show (`why_no_knee`): never "still
    rising" where the top levels had no steady window or the client was the limit."""
    why = why_no_knee(levels)
    mode = levels[-1].mode

    def at(values: tuple[float, ...]) -> str:
        return ", ".join(load_label(mode, v) for v in values)

    parts = []
    if why.rising_at is not None:
        parts.append(f"output throughput still rising at {at((why.rising_at,))}, the highest steady level")
    if why.noisy_at is not None:
        parts.append(f"the plateau's first level, {at((why.noisy_at,))}, is known only to wider than ±5 %")
    if why.unsteady:
        parts.append(f"no steady window at {at(why.unsteady)}: a longer --duration")
    if why.client_limited:
        said = f"the client was the limit at {at(why.client_limited)}"
        return f"among the server's levels ({'; '.join([said, *parts])})"
    return f"({'; '.join(parts or ['fewer than two steady levels to compare'])})"
