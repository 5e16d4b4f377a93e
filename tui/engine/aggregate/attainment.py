"""A level's SLO attainment: the share of its window's requests that met every objective given (TTFT, TPOT,
E2E), with Wilson's 95 % interval, and the goodput of those that met it. Failed requests count against;
cut ones (cancelled) are counted apart. A ramp reads the interval's lower bound, never the share alone."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate import metrics as m
from tui.engine.aggregate.run_noise import wilson_interval
from tui.engine.snapshot import LevelView, SloView

FloatArray = npt.NDArray[np.float64]


def any_slo(ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None) -> bool:
    return ttft_ms is not None or tpot_ms is not None or e2e_ms is not None


def slo_view(
    rows: dict[str, FloatArray],
    *,
    ok: int,
    failed: int,
    cut: int,
    window_s: float,
    measured: bool,
    slo: tuple[float | None, float | None, float | None],
) -> SloView | None:
    """``rows``: the window's successful requests (``ttft_ms``, ``tpot_ms``, ``e2e_ms``, ``osl``), a uniform
    sample of ``ok`` requests where the level outgrew its exact cap; ``slo``: (TTFT, TPOT, E2E) objectives
    in ms. None without any objective."""
    if not any_slo(*slo):
        return None
    good = m.good_mask(rows["ttft_ms"], rows["tpot_ms"], slo[0], slo[1], rows["e2e_ms"], slo[2])
    sample = len(good)
    scale = ok / sample if sample else 0.0  # 1 while the level's requests are kept exactly
    met = round(int(good.sum()) * scale)
    requests = ok + failed
    low, high = wilson_interval(met, requests)
    nan = float("nan")
    rate = (lambda x: x / window_s) if measured and window_s > 0 else (lambda x: nan)
    return SloView(
        met=met,
        requests=requests,
        cut=cut,
        attainment=met / requests if requests else nan,
        low=low,
        high=high,
        goodput_rps=rate(met),
        goodput_tps=rate(float(rows["osl"][good].sum()) * scale),
    )


def capacity_level(levels: Iterable[LevelView], target: float) -> LevelView | None:
    """The highest load whose attainment's 95 % lower bound meets ``target`` (None: none did): the capacity
    at the SLO, which the auto ramp and bench's end table both say."""
    passed = [lv for lv in levels if lv.slo is not None and lv.slo.low >= target]
    return max(passed, key=lambda lv: lv.value, default=None)
