"""A session's load schedule, to run again against any server: its levels with their durations (bench
holds each for its recorded time) and every load change at its time (the live app sets them as they came,
pauses included), so a hand-steered exploration becomes a reproducible benchmark."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tui.engine.config import LoadTarget
from tui.engine.recording.file import Session, SessionError, read_session
from tui.engine.recording.plain_json import Decoder


@dataclass(frozen=True)
class ScheduledLevel:
    target: LoadTarget
    duration_s: float
    """From the level's start to its end (a pause, the next level, or the run's end); a level that began
    before the workers were up starts when they first reported, as bench's timing of a level does."""


@dataclass(frozen=True)
class LoadChange:
    at_s: float
    """Seconds after the first level began."""
    target: LoadTarget


@dataclass(frozen=True)
class Schedule:
    levels: tuple[ScheduledLevel, ...]
    changes: tuple[LoadChange, ...]
    """The first level's target at 0 s, then every later load change (a pause too)."""
    end_s: float
    """When the recorded run stopped, after the first level began."""


def schedule_of(session: Session) -> Schedule:
    """The levels and load changes of ``session`` (`SessionError` if it has no level)."""
    decoder = Decoder(session.header.get("schema", {}))
    begins: list[tuple[int, LoadTarget]] = []
    ends: list[int] = []
    changes: list[tuple[int, LoadTarget]] = []
    first_batch: int | None = None
    for e in session.events:
        kind = e.get("k")
        if kind == "b" and first_batch is None:
            first_batch = int(e["t"])
        if kind == "level":
            at = int(e["t"])
            if e.get("op") == "begin":
                begins.append((at, replace(decoder.decode(e["target"]), paused=False)))
            else:
                ends.append(at)
        elif kind == "load":
            changes.append((int(e["t"]), decoder.decode(e["target"])))
    if not begins:
        raise SessionError(f"{session.path}: the session has no load level to schedule")
    start = begins[0][0]
    levels = []
    for i, (at, target) in enumerate(begins):
        later = [t for t in ends if t >= at] + ([begins[i + 1][0]] if i + 1 < len(begins) else [])
        stop = min(later) if later else session.end_ns
        began = max(at, first_batch) if first_batch is not None else at
        levels.append(ScheduledLevel(target, max(0.0, (stop - began) / 1e9)))
    timeline = [LoadChange(0.0, begins[0][1])]
    timeline += [LoadChange((t - start) / 1e9, target) for t, target in changes if t >= start]
    return Schedule(tuple(levels), tuple(timeline), (session.end_ns - start) / 1e9)


def read_schedule(path: Path) -> Schedule:
    """The schedule of the session at ``path``."""
    return schedule_of(read_session(path))
