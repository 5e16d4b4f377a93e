"""Results documents for the tests, built with the real builder from the frozen snapshot (no engine)."""

from __future__ import annotations

from dataclasses import replace

from tests.support import frozen
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.config_record import run_info
from tui.engine.results.build import ClientSummary, LevelExtras, RunInfo, build_results
from tui.engine.results.model import Results
from tui.engine.snapshot import Snapshot


def frozen_info(
    *,
    url: str = "http://127.0.0.1:8000/v1",
    model: str = "org/sim-llama-8b",
    load: LoadTarget | None = None,
    options: EngineOptions | None = None,
    target: TargetConfig | None = None,
    workers: int = 1,
) -> RunInfo:
    return run_info(
        target or TargetConfig(base_url=url, api_key="sk-never-written"),
        WorkloadConfig(isl=64, osl=128),
        load or LoadTarget(concurrency=8),
        options=options or EngineOptions(slo_ttft_ms=500.0),
        workers=workers,
        model=model,
        started_at_s=1_700_000_000.0,
    )


def frozen_results(
    *,
    rate: bool = False,
    both: bool = False,
    interrupted: str | None = None,
    model: str = "org/sim-llama-8b",
    info: RunInfo | None = None,
    snap: Snapshot | None = None,
    extras: LevelExtras | None = None,
) -> Results:
    """The frozen run's results; ``rate``: every level a rate level; ``both``: the later half rate levels
    (a run switched with `m`)."""
    snap = snap or frozen.snapshot()
    levels = snap.levels
    if rate or both:
        first = len(levels) // 2 if both else 0
        levels = tuple(
            replace(lv, mode="rate", value=2.0 * (i + 1)) if i >= first else lv for i, lv in enumerate(levels)
        )
    load = LoadTarget(concurrency=8)
    if rate or both:
        load = LoadTarget(mode="rate", rate=2.0, max_concurrency=64)
    info = info or frozen_info(model=model, load=load)
    views = [(lv, extras or LevelExtras()) for lv in levels]
    client = ClientSummary(1.0, 0.2, saturated=False)
    return build_results(info, replace(snap, levels=levels), views, client, interrupted=interrupted)
