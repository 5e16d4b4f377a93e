"""bench's ``--ab``: the second side's engine, the turns of ``alternate``, and the end's comparison.

Two engines, one per endpoint, each a whole `EngineHandle` with its own workers, store and session; the
level loop steers both alike. One engine with two targets would thread a side through every record, every
aggregate and every results key; two engines reuse all of it, and each side's figures are exactly what a
run against it alone would report. The verdicts are `tokentop compare`'s own statistics and rules, judged
by the live app's `tui.engine.ab.pair.AbPair` from the samples the requests left (in turns, a side's turns
at a load its repeats): no session is needed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tui import units
from tui.bench.progress import Progress, load_label
from tui.bench.table import summary
from tui.configs import AbConfig, BenchConfig
from tui.engine.ab.pair import AbPair, b_file, b_options, b_workload
from tui.engine.api import Engine
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.probe import Probed, ProbeError
from tui.engine.results.model import Ab, Results
from tui.engine.sessions.ab import GOODPUT, SLO_METRIC, ab_capacity
from tui.terminal import print_or_drop, say

POLL_S = 0.25
"""How often a turn looks for a fatal error."""
SHOWN = ("output tok/s", "TTFT p50 ms", "TPOT p50 ms", "ITL p50 ms", SLO_METRIC, GOODPUT[0])
"""The figures bench's end table compares; the results hold every one compare judges."""


@dataclass(frozen=True)
class Sessions:
    """Each side's engine options: B's session beside A's (with ``-b``), none when A records none (the
    verdicts are judged by the pair as the run goes, from no session)."""

    a: EngineOptions
    b: EngineOptions


def sessions_for(options: EngineOptions) -> Sessions:
    """Both sides' engine options (`b_options`)."""
    return Sessions(options, b_options(options))


@dataclass(frozen=True)
class Side:
    """What one side's engine is made with."""

    target: TargetConfig
    options: EngineOptions
    workload: WorkloadConfig
    load: LoadTarget
    """The load it starts under."""
    requests_log: Path | None


def plan_sides(
    config: BenchConfig, a: TargetConfig, progress: Progress, probe: Callable[[TargetConfig], Probed]
) -> list[Side]:
    """A's side alone, or with ``--ab`` A's and B's; B is probed first, and no side at all means B cannot
    be used (the error is said)."""
    if config.ab is None:
        return [Side(a, config.options, config.workload, config.levels[0], config.requests_log)]
    b = probe_b(config.ab.target, progress, probe)
    if b is None:
        return []
    return both_sides(config, a, b, sessions_for(config.options))


def both_sides(config: BenchConfig, a: TargetConfig, b: TargetConfig, sessions: Sessions) -> list[Side]:
    """A's and B's engines' makings. ``alternate``: both start paused (the turns begin once both are up)
    and B sends prompts of its own salt (`b_workload`); ``parallel``: the same prompts in the same order,
    to servers that share nothing."""
    assert config.ab is not None
    first, w, mode = config.levels[0], config.workload, config.ab.mode
    first = replace(first, paused=True) if mode == "alternate" else first
    return [Side(a, sessions.a, w, first, config.requests_log),
            Side(b, sessions.b, b_workload(w, mode), first, b_side(config.requests_log))]  # fmt: skip


def b_side(path: Path | None) -> Path | None:
    """B's file beside A's (`b_file`), if A has one."""
    return None if path is None else b_file(path)


def ab_table(section: Ab) -> str:
    """bench's end table of the comparison: per level, A, B, the change and its verdict; with an SLO, the
    attainment's and the goodput's, and the highest load each side serves at it."""
    rows = [("level", "metric", "A", "B", "B vs A", "verdict")]
    reasons: dict[str, None] = {}
    for lv in section.levels:
        name = load_label("rate" if lv.mode == "rate" else "concurrency", lv.value)
        for d in lv.differences:
            if d.metric not in SHOWN:
                continue
            pct = "-" if d.change_pct is None else f"{d.change_pct:+.1f} %"
            show = _share if d.metric == SLO_METRIC else units.figure
            rows.append((name, d.metric, show(d.a), show(d.b), pct, d.verdict))
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
    if section.capacity is not None:
        lines.append(section.capacity.line())
    return "\n".join([head, *lines, *(f"unjudged: {r}" for r in reasons)])


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


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


def paired_judge(ab: AbConfig | None, engines: list[Engine]) -> AbPair | None:
    """The live app's judge over both engines (`AbPair`), made before they start so it keeps the samples
    of every record; None for one side. In turns it only judges: `run_turns` steers each side."""
    if ab is None or len(engines) != 2:
        return None
    return AbPair(engines[0], engines[1], mode=ab.mode, threshold_pct=ab.threshold_pct)


def with_b(
    results: Results,
    ab: AbConfig,
    sides: tuple[Engine, Engine, AbPair | None],
    interrupted: str | None,
    status: int,
) -> Results:
    """A's results with the ``ab`` section (B's own document and each level judged by the pair, as the app
    judges), and both sides' tables and the comparison printed."""
    a, b, pair = sides
    b_results, a_snap, b_snap = b.results(interrupted=interrupted), a.snapshot(), b.snapshot()
    assert isinstance(b_results, Results)
    if ab.mode == "alternate":  # a side's paused start, before its first turn, is no level
        results, b_results = _sent(results), _sent(b_results)
        a_snap, b_snap = (replace(s, levels=tuple(lv for lv in s.levels if lv.completed + lv.failed))
                          for s in (a_snap, b_snap))  # fmt: skip
    levels = pair.judge(results, b_results) if pair is not None else ()
    section = Ab(mode=ab.mode, threshold_pct=ab.threshold_pct, b=b_results, levels=levels,
                 capacity=ab_capacity(results, b_results))  # fmt: skip
    if status != 1 and section.levels:
        print_or_drop(f"A: {results.target.url}\n{summary(a_snap)}\n\n{b_line(section)}\n{summary(b_snap)}"
                      f"\n\n{ab_table(section)}")  # fmt: skip
    return replace(results, ab=section)


def _sent(doc: Results) -> Results:
    """``doc`` without the levels that sent nothing."""
    return replace(
        doc, levels=tuple(lv for lv in doc.levels if (lv.level_completed or 0) + (lv.level_failed or 0))
    )


def run_turns(
    sides: list[Engine],
    load: LoadTarget,
    times: tuple[float, float],
    progress: Progress,
    label: str,
    rest: Callable[[Engine], str | None],
) -> str | None:
    """``alternate``: hold ``load`` on one side at a time in equal turns, A B B A A B...: the order turns
    round each pair, so a drift that grows steadily over the level falls on both sides alike. ``times`` is
    each side's time in all and the longest turn (two turns a side at least). ``rest`` pauses the side whose
    turn ends and waits until it is idle, so neither ever sees the other's load (a side's two turns in a
    row are two levels). A fatal reason, or None."""
    duration_s, block_s = times
    count = max(2, math.ceil(duration_s / block_s))
    turn_s = duration_s / count
    previous: tuple[str, Engine] | None = None
    for k in range(1, count + 1):
        pair = (("A", sides[0]), ("B", sides[1]))
        for name, on in pair if k % 2 else pair[::-1]:
            if previous is not None and (reason := rest(previous[1])) is not None:
                return f"{previous[0]}: {reason}"
            on.set_load(load)
            previous = (name, on)
            progress.show(f"{label}turn {k}/{count} of {turn_s:.1f} s on {name}", force=True)
            deadline = time.monotonic() + turn_s
            while (left := deadline - time.monotonic()) > 0:
                time.sleep(min(POLL_S, left))
                if (fatal := on.snapshot().fatal) is not None:
                    return f"{name}: {fatal}"
    return None


def b_line(section: Ab) -> str:
    """One line naming B, for the table's head."""
    return f"B: {section.b.target.url} (model {section.b.target.model})"
