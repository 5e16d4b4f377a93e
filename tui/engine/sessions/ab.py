"""A/B: each level of B judged against the same level of A by `tui.engine.sessions.compare`'s rules (the
noise between blocks of time, a minimum effect), from the samples each side's requests left, as the
results' ``ab`` section holds it; `turns` reads a recorded side's turns as repeats."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.engine.aggregate.run_noise import wilson_interval
from tui.engine.recording.file import SessionError
from tui.engine.results.ab import AbCapacity, AbDifference, AbLevel, AbServed
from tui.engine.sessions.compare import Difference, Group, Run, compare_levels, judge, load_key
from tui.engine.sessions.samples import Blocks

if TYPE_CHECKING:
    from tui.engine.results.model import Level, Results

SLO_METRIC = "SLO attainment"
"""The share of a level's window's requests that met every objective (`tui.engine.aggregate.attainment`)."""
GOODPUT = ("output goodput", "slo.output_goodput", "good_tok_rate", True)
"""Output tokens/s of the requests that met the SLO, judged as compare judges tok/s (its blocks' rates)."""


def judge_live(
    a: tuple[dict[str, Any], dict[str, Blocks]],
    b: tuple[dict[str, Any], dict[str, Blocks]],
    threshold_pct: float,
) -> AbLevel | None:
    """One level both sides ran, judged as `tokentop compare` judges two runs: each side its results' level
    and the samples of its steady window, kept as the records came (`tui.engine.sessions.samples`)."""
    runs = [Run(Path(name), {"levels": [lv]}, {int(lv["level_id"]): blocks}) for name, (lv, blocks) in
            (("A", a), ("B", b))]  # fmt: skip
    levels = _ab_levels(Group(runs[:1]), Group(runs[1:]), threshold_pct)
    return levels[0] if levels else None


def judge_live_turns(
    a: list[tuple[dict[str, Any], dict[str, Blocks]]],
    b: list[tuple[dict[str, Any], dict[str, Blocks]]],
    threshold_pct: float,
) -> AbLevel | None:
    """One load both sides held in turns (``alternate``): each side its turns' levels and samples (as
    `judge_live`), a side's turns its repeats, so drift shared by both sides' turns cancels."""
    groups = []
    for name, side in (("A", a), ("B", b)):
        runs = [Run(Path(f"{name}{k}"), {"levels": [lv]}, {int(lv["level_id"]): blocks})
                for k, (lv, blocks) in enumerate(side)]  # fmt: skip
        groups.append(Group(runs))
    levels = _ab_levels(groups[0], groups[1], threshold_pct)
    return levels[0] if levels else None


def turns(run: Run) -> list[Run]:
    """A run that held each load in several turns (each a level) as one run per turn: the k-th turn of
    every load; a level with no request (a side's paused start) is no turn."""
    by_load: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for lv in run.levels():
        if int(lv.get("level_completed", 0)) + int(lv.get("level_failed", 0)) > 0:
            by_load.setdefault(load_key(lv), []).append(lv)
    n = min((len(lvs) for lvs in by_load.values()), default=0)
    return [
        Run(run.path, {**run.doc, "levels": [lvs[k] for lvs in by_load.values()]}, run.samples, run.cut)
        for k in range(n)
    ]


def slo_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> AbDifference | None:
    """SLO attainment of B against A at one load (a side's turns pooled), or None without an SLO. A share is
    judged by Wilson's intervals: ``better``/``worse`` only when the two 95 % intervals do not overlap."""
    sides: list[tuple[float | None, tuple[float, float]]] = []
    for levels in (a, b):
        slos: list[dict[str, Any]] = [lv.get("slo") or {} for lv in levels]
        if not all(slos):
            return None
        met = sum(int(s["met"]) for s in slos)
        requests = sum(int(s["requests"]) for s in slos)
        sides.append((met / requests if requests else None, wilson_interval(met, requests)))
    (x, (a_lo, a_hi)), (y, (b_lo, b_hi)) = sides
    verdict = "better" if b_lo > a_hi else "worse" if b_hi < a_lo else "within noise"
    pct = None if x is None or y is None or x == 0 else (y - x) / x * 100
    return AbDifference(metric=SLO_METRIC, a=x, b=y, change_pct=pct, verdict=verdict)


def slo_differences(
    a: Group, b: Group, load: tuple[str, float], threshold_pct: float
) -> tuple[AbDifference, ...]:
    """With an SLO on both sides: the attainment's and the goodput's difference at ``load``; else none."""
    levels = (a.levels()[load], b.levels()[load])
    share = slo_difference(*levels)
    if share is None:
        return ()
    d = judge(a, b, levels, GOODPUT, threshold_pct)
    goodput = AbDifference(metric=d.metric, a=d.base, b=d.other, change_pct=d.percent, verdict=d.verdict,
                           ci95_pct=d.interval, reason=d.reason)  # fmt: skip
    return share, goodput


def _ab_levels(a: Group, b: Group, threshold_pct: float) -> tuple[AbLevel, ...]:
    """compare's rows of B against A as the results' ``ab`` levels, each with its SLO attainment's and its
    goodput's."""
    return tuple(
        AbLevel(
            mode=row["load"][0],
            value=row["load"][1],
            a_level_id=int(row["level_ids"][0]),
            b_level_id=int(row["level_ids"][1]),
            errors=row["errors"],
            differences=tuple(
                AbDifference(
                    metric=d.metric,
                    a=d.base,
                    b=d.other,
                    change_pct=d.percent,
                    verdict=d.verdict,
                    ci95_pct=d.interval,
                    reason=d.reason,
                )
                for d in row["differences"]
            )
            + slo_differences(a, b, row["load"], threshold_pct),
        )
        for row in compare_levels(a, b, threshold_pct)
    )


def saved_comparison(path: Path) -> dict[str, Any]:
    """A ``bench --ab`` results file's comparison as it was judged, in `comparison`'s shape (``tokentop
    compare FILE``); `SessionError` when the file holds no ``ab`` section."""
    from tui.engine.results.files import ResultsFileError, read_results

    try:
        doc = read_results(path)
    except ResultsFileError as exc:
        raise SessionError(str(exc)) from None
    ab = doc.ab
    if ab is None:
        raise SessionError(f"{path}: no A/B section (bench --ab): compare needs at least two runs")
    sides = (("A", doc), ("B", ab.b))
    return {
        "runs": [
            {
                "path": f"{name}: {d.target.url}",
                "knee": None if d.saturation.knee is None else d.saturation.knee.value,
                "cut": d.interrupted,
                "model": d.target.model,
            }
            for name, d in sides
        ],
        "warnings": [],
        "noise": f"as judged by bench --ab ({ab.mode}): a verdict only beyond ±{ab.threshold_pct:g} %",
        "threshold_pct": ab.threshold_pct,
        "pairs": [
            {
                "base": f"A: {doc.target.url}",
                "other": f"B: {ab.b.target.url}",
                "levels": [
                    {
                        "load": (lv.mode, lv.value),
                        "level_ids": (lv.a_level_id, lv.b_level_id),
                        "errors": lv.errors,
                        "differences": [
                            Difference(d.metric, d.a, d.b, d.change_pct, d.verdict, d.ci95_pct, d.reason)
                            for d in lv.differences
                        ],
                    }
                    for lv in ab.levels
                ],
            }
        ],
        "curves": [
            {"path": name, "points": [(load_value(lv), lv.output_throughput) for lv in d.levels]}
            for name, d in sides
        ],
    }


def ab_capacity(a: Results, b: Results) -> AbCapacity | None:
    """Each side's capacity at the SLO, or None without one."""
    target = a.config.slo_target
    if a.capacity_at_slo is None or target is None:
        return None
    return AbCapacity(target=target, a=served(a, target), b=served(b, target))


def served(doc: Results, target: float) -> AbServed | None:
    """The highest load whose SLO attainment, pooled over the side's levels there (its turns, in turns),
    has a Wilson 95 % lower bound at ``target`` or above (a level's own capacity rule); None: no load."""
    pooled: dict[tuple[str, float], tuple[int, int]] = {}
    for lv in doc.levels:
        if lv.slo is not None:
            met, requests = pooled.get((lv.mode, load_value(lv)), (0, 0))
            pooled[(lv.mode, load_value(lv))] = (met + lv.slo.met, requests + lv.slo.requests)
    passed = [
        (load, met, n) for load, (met, n) in pooled.items() if n and wilson_interval(met, n)[0] >= target
    ]
    if not passed:
        return None
    (mode, value), met, requests = max(passed, key=lambda p: p[0][1])
    return AbServed(mode=mode, value=value, met=met, requests=requests)


def load_value(level: Level) -> float:
    """A level's users, or its requests per second."""
    return float((level.request_rate if level.mode == "rate" else level.concurrency) or 0)
