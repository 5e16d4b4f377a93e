"""What `tokentop bench` prints at the end of a run: one row per level, then the knee, errors and warnings.
A pure function of the final snapshot, so a test reads the text without running a load."""

from __future__ import annotations

import math
from collections.abc import Mapping

from tui.bench.progress import load_label
from tui.engine.aggregate.metrics import why_no_knee
from tui.engine.snapshot import LevelView, Snapshot
from tui.units import ms_figure


def format_table(levels: tuple[LevelView, ...], server_hits: Mapping[int, float | None] | None = None) -> str:
    """The end-of-run table (stdout). ``server_hits``: each level's prefix-cache hit rate by the server's
    counters (the results' ``server.prefix_cache_hit_rate``), shown where the requests gave no
    ``cached_tokens``."""
    # A reasoning model's answer starts after its thinking: time to first answer token gets a column then.
    reasoning = any(math.isfinite(lv.reasoning_tokens) for lv in levels)
    cols: tuple[str, ...] = ("level", "done", "fail", "ISL", "OSL", "req/s", "out tok/s", "TTFT p50",
                             "TTFT p99", "TPOT p50", "ITL p50", "ITL p99", "E2E p50", "± lag",
                             "tok/chunk", "steady")  # fmt: skip
    # A server that reports cached prompt tokens gets the prefix-cache hit rate (cached / prompt tokens).
    hits = {lv.level_id: hit_rate(lv, (server_hits or {}).get(lv.level_id)) for lv in levels}
    cached = any(rate is not None for rate in hits.values())
    if reasoning:
        cols = (*cols[:9], "TTFA p50", *cols[9:])
    if cached:
        cols = (*cols[:-1], "prefix cache", cols[-1])
    rows: list[tuple[str, ...]] = [cols]
    for lv in levels:
        name = table_name(lv)

        def fig(metric: str, q: str, lv: LevelView = lv) -> str:
            stats = getattr(lv, metric)  # `~`: too few samples to bound it; `*`: the timing bound is material
            mark = "*" if f"{metric}_{q}" in lv.timing_uncertain else ""
            return ("~" if stats.unbounded(q) else "") + ms_figure(getattr(stats, q)) + mark

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
        rows.append(row)
    widths = [max(len(r[c]) for r in rows) for c in range(len(cols))]
    lines = []
    for k, r in enumerate(rows):
        lines.append(
            "  ".join(v.rjust(w) if c else v.ljust(w) for c, (v, w) in enumerate(zip(r, widths, strict=True)))
        )
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(
        "(over each level's steady window: done and fail count the requests sent in it; latencies in ms,"
        " ISL/OSL mean tokens by the server's count; ~ too few samples to bound a percentile; ± lag: the"
        " client's timing bound, its loop lag p99; * a figure it is 5 % or more of)"
    )
    return "\n".join(lines)


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


def summary(snap: Snapshot, server_hits: Mapping[int, float | None] | None = None) -> str:
    """The table and, under it, the knee, the errors and every warning the run had: what bench prints
    (``server_hits``: as `format_table`'s)."""
    lines = [format_table(snap.levels, server_hits)]
    if snap.knee is not None:
        mode, v = snap.load.mode, snap.knee.value
        at = f"speed x{v:g}" if mode == "trace" else f"{v:g} {'users' if mode == 'concurrency' else 'req/s'}"
        lines.append(
            f"knee: {at} ({snap.knee.output_tps:,.0f} output tok/s of a {snap.knee.peak_tps:,.0f} peak)"
        )
    elif len(snap.levels) > 1:
        lines.append(f"knee: not found {no_knee_reason(snap.levels)}")
    lags = [
        f"{table_name(lv)} p50 {lv.sched_lag.p50:.2f} p99 {lv.sched_lag.p99:.2f}"
        for lv in snap.levels
        if lv.mode == "trace" and lv.sched_lag.n
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
            )
    if snap.health.saturated:
        lines.append("warning: " + snap.health.reason)
    lines.extend("warning: " + notice for notice in snap.notices)
    return "\n".join(lines)


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
