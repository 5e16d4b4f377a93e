"""bench's ``--ab``: the second side's engine, the sessions both sides record, and the end's comparison.

Two engines, one per endpoint, each a whole `EngineHandle` with its own workers, store and session; the
level loop steers both alike. One engine with two targets would thread a side through every record, every
aggregate and every results key; two engines reuse all of it, and each side's figures are exactly what a
run against it alone would report. Each side records a session, so the verdicts are `tokentop compare`'s
own, taken from the two sessions: the same statistics, the same rules.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tui import units
from tui.bench.progress import Progress, load_label
from tui.bench.table import summary
from tui.configs import AbConfig
from tui.engine.api import Engine
from tui.engine.config import EngineOptions, TargetConfig
from tui.engine.host.probe import Probed, ProbeError
from tui.engine.recording.file import SUFFIX
from tui.engine.results.model import Ab, Results
from tui.terminal import print_or_drop, say

SHOWN = ("output tok/s", "TTFT p50 ms", "TPOT p50 ms", "ITL p50 ms")
"""The figures bench's end table compares; the results hold every one compare judges."""


@dataclass
class Sessions:
    """Where each side records its session: beside the user's (B's with ``-b``), or in a temporary folder
    that `cleanup` removes when the user asked for none (the verdicts need both)."""

    a: EngineOptions
    b: EngineOptions
    temporary: Path | None = None

    def cleanup(self) -> None:
        if self.temporary is not None:
            shutil.rmtree(self.temporary, ignore_errors=True)


def sessions_for(options: EngineOptions) -> Sessions:
    """Both sides' engine options, each recording its own session."""
    temporary = None
    a_path = options.record
    if a_path is None:
        temporary = Path(tempfile.mkdtemp(prefix="tokentop-ab-"))
        a_path = str(temporary / f"a{SUFFIX}")
    a = Path(a_path)
    stem = a.name.removesuffix(SUFFIX) if a.name.endswith(SUFFIX) else a.stem
    b_path = a.with_name(f"{stem}-b{SUFFIX}")
    return Sessions(replace(options, record=str(a)), replace(options, record=str(b_path)), temporary)


def b_side(path: Path | None) -> Path | None:
    """B's file beside A's: ``requests.jsonl`` -> ``requests-b.jsonl``."""
    return None if path is None else path.with_name(f"{path.stem}-b{path.suffix}")


def judged(ab: AbConfig, a_session: Path, b_session: Path, b_results: Results) -> Ab:
    """The results' ``ab`` section: B's run and each level's verdicts, by `tokentop compare`'s rules."""
    from tui.engine.sessions.ab import judge_levels

    levels = judge_levels(a_session, b_session, ab.threshold_pct)
    return Ab(mode=ab.mode, threshold_pct=ab.threshold_pct, b=b_results, levels=levels)


def ab_table(section: Ab) -> str:
    """bench's end table of the comparison: per level, A, B, the change and its verdict."""
    rows = [("level", "metric", "A", "B", "B vs A", "verdict")]
    reasons: dict[str, None] = {}
    for lv in section.levels:
        name = load_label("rate" if lv.mode == "rate" else "concurrency", lv.value)
        for d in lv.differences:
            if d.metric not in SHOWN:
                continue
            pct = "-" if d.change_pct is None else f"{d.change_pct:+.1f} %"
            rows.append((name, d.metric, units.figure(d.a), units.figure(d.b), pct, d.verdict))
            name = ""
            if d.verdict == "unjudged":
                reasons[d.reason] = None
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i in (0, 1, 5) else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]
    clears = f"±{section.threshold_pct:g} %"
    head = f"B vs A ({section.mode}): a verdict only where the change's 95 % interval clears {clears}"
    return "\n".join([head, *lines, *(f"unjudged: {r}" for r in reasons)])


def probe_b(
    target: TargetConfig, progress: Progress, probe: Callable[[TargetConfig], Probed]
) -> TargetConfig | None:
    """B's server checked as A's was, its model resolved; None (the error said) if it cannot be used."""
    progress.show(f"probing B at {target.base_url}/models…", force=True)
    try:
        probed = probe(target)
    except ProbeError as exc:
        progress.done()
        say(f"tokentop: error: B: {exc}")
        return None
    picked = probed.note(target.model)
    progress.note(f"B: model {probed.model} at {target.base_url}" + (f" ({picked})" if picked else ""))
    return replace(target, model=probed.model)


def with_b(
    results: Results, ab: AbConfig, a: Engine, b: Engine, interrupted: str | None, status: int
) -> Results:
    """A's results with the ``ab`` section: B's own document and each level judged from both sessions."""
    from tui.engine.recording.file import SessionError

    b_results = b.results(interrupted=interrupted)
    assert isinstance(b_results, Results)
    a_session, b_session = getattr(a, "session_path", None), getattr(b, "session_path", None)
    if a_session is None or b_session is None:
        return replace(results, notices=(*results.notices, "A/B: a side recorded no session: not judged"))
    try:
        section = judged(ab, a_session, b_session, b_results)
    except SessionError as exc:
        return replace(results, notices=(*results.notices, f"A/B: not judged: {exc}"))
    if status != 1 and section.levels:
        print_or_drop(f"\n{b_line(section)}\n{summary(b.snapshot())}\n\n{ab_table(section)}")
    return replace(results, ab=section)


def b_line(section: Ab) -> str:
    """One line naming B, for the table's head."""
    return f"B: {section.b.target.url} (model {section.b.target.model})"
