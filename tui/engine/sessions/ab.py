"""A/B over two sessions recorded side by side: each level of B judged against the same level of A by
`tui.engine.sessions.compare`'s rules (the noise between blocks of time, a minimum effect), as the results'
``ab`` section holds it."""

from __future__ import annotations

from pathlib import Path

from tui.engine.results.ab import AbDifference, AbLevel
from tui.engine.sessions.compare import Group, compare_levels, load_run


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
