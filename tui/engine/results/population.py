"""What each figure of a level covers (manual: ``live``): whole requests or arrivals, and per metric its
population, whether unfinished streams are in it, why it is null when it has no sample, and how far to
trust each percentile (its 95 % interval, `tui.engine.aggregate.intervals`)."""

from __future__ import annotations

from dataclasses import replace

from tui.engine.results.model import MetricPopulation, PercentileTrust
from tui.engine.snapshot import LevelView, Stats

WHOLE_REQUEST_METRICS = ("tpot", "e2el", "itl_e2e")
"""Metrics that need a finished request: over arrivals, they cover the requests that ended in the window."""


def population(lv: LevelView) -> dict[str, MetricPopulation]:
    """Per metric (``output_throughput``, ``ttft``, ``itl``, ``tpot``, ``e2el``, ``itl_e2e``): ``n``,
    ``unfinished_included``, and ``null_because`` when it has no sample (``since_s`` for TTFT); per
    percentile its ``ci95_ms`` and ``bounded`` (false: too few samples for an interval), and throughput's
    ``ci95`` (null: a window under 4 s)."""
    arrivals = lv.measured_over == "arrivals"
    since_s = lv.ttft_since_s if arrivals else lv.window_from_s
    out = {
        "output_throughput": MetricPopulation(
            unfinished_included=arrivals, ci95=_pair(lv.output_tps_ci), has_ci95=True
        ),
        "ttft": MetricPopulation(n=lv.ttft.n, unfinished_included=arrivals, since_s=since_s, has_since=True),
        "itl": MetricPopulation(n=lv.itl_chunk.n, unfinished_included=arrivals),
    }
    for name in WHOLE_REQUEST_METRICS:
        out[name] = MetricPopulation(n=lv.finished_in_window, unfinished_included=False)
    for name, attr in (("ttft", "ttft"), ("itl", "itl_chunk"), ("tpot", "tpot"), ("e2el", "e2el"),
                       ("itl_e2e", "itl_e2e")):  # fmt: skip
        stats: Stats = getattr(lv, attr)
        p50, p90, p95, p99 = _percentiles(stats)
        out[name] = replace(out[name], p50=p50, p90=p90, p95=p95, p99=p99)
        if stats.n == 0:
            because = "no request finished in the window" if name in WHOLE_REQUEST_METRICS else "no samples"
            out[name] = replace(out[name], null_because=because)
    return out


def _pair(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [round(ci[0], 6), round(ci[1], 6)]


def _percentiles(stats: Stats) -> list[PercentileTrust]:
    """``p50``, ``p90``, ``p95``, ``p99``: each one's 95 % interval in ms and whether it has one."""
    return [
        PercentileTrust(ci95_ms=_pair(ci), bounded=ci is not None) for ci in stats.intervals or (None,) * 4
    ]
