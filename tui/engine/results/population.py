"""What each figure of a level covers (manual: ``live``): whole requests or arrivals, and per metric its
population, whether unfinished streams are in it, and why it is null when it has no sample."""

from __future__ import annotations

from dataclasses import replace

from tui.engine.results.model import MetricPopulation
from tui.engine.snapshot import LevelView

WHOLE_REQUEST_METRICS = ("tpot", "e2el", "itl_e2e")
"""Metrics that need a finished request: over arrivals, they cover the requests that ended in the window."""


def population(lv: LevelView) -> dict[str, MetricPopulation]:
    """Per metric (``output_throughput``, ``ttft``, ``itl``, ``tpot``, ``e2el``, ``itl_e2e``): ``n``,
    ``unfinished_included``, and ``null_because`` when it has no sample (``since_s`` for TTFT)."""
    arrivals = lv.measured_over == "arrivals"
    since_s = lv.ttft_since_s if arrivals else lv.window_from_s
    out = {
        "output_throughput": MetricPopulation(unfinished_included=arrivals),
        "ttft": MetricPopulation(n=lv.ttft.n, unfinished_included=arrivals, since_s=since_s, has_since=True),
        "itl": MetricPopulation(n=lv.itl_chunk.n, unfinished_included=arrivals),
    }
    for name in WHOLE_REQUEST_METRICS:
        out[name] = MetricPopulation(n=lv.finished_in_window, unfinished_included=False)
    for name, attr in (("ttft", "ttft"), ("itl", "itl_chunk"), ("tpot", "tpot"), ("e2el", "e2el"),
                       ("itl_e2e", "itl_e2e")):  # fmt: skip
        if getattr(lv, attr).n == 0:
            because = "no request finished in the window" if name in WHOLE_REQUEST_METRICS else "no samples"
            out[name] = replace(out[name], null_because=because)
    return out
