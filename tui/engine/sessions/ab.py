"""A/B over two sessions recorded side by side: each level of B judged against the same level of A by
`tui.engine.sessions.compare`'s rules (the noise between blocks of time, a minimum effect), as the results'
``ab`` section holds it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.engine.recording.file import SessionError
from tui.engine.results.ab import AbDifference, AbLevel
from tui.engine.sessions.compare import Difference, Group, compare_levels, load_run

if TYPE_CHECKING:
    from tui.engine.results.model import Level


def judge_levels(a_session: Path, b_session: Path, threshold_pct: float) -> tuple[AbLevel, ...]:
    """Per load both sessions ran: each figure on A and on B, the change and its verdict."""
    a, b = Group([load_run(a_session)]), Group([load_run(b_session)])
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
            ),
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
            {"path": name, "points": [(_load(lv), lv.output_throughput) for lv in d.levels]}
            for name, d in sides
        ],
    }


def _load(level: Level) -> float:
    return float((level.request_rate if level.mode == "rate" else level.concurrency) or 0)
