"""The record group of the faces that run load (live, bench): ``--record`` and its neighbours, and where a
session goes by default (one file per run under ``state_dir()/sessions``, named by its date, time and
``--label``); ``--schedule`` (a session's levels run again) and ``--baseline`` (an earlier run beside)."""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.configs import UsageError
from tui.engine.config import EngineOptions
from tui.engine.recording.file import SUFFIX
from tui.engine.sessions.schedule import Schedule
from tui.outputs import state_dir

if TYPE_CHECKING:
    from tui.engine.sessions.baseline import Baseline


def add_record_args(p: argparse.ArgumentParser) -> None:
    """--record, --no-record, --record-text, --label."""
    p.add_argument(
        "--record",
        metavar="PATH",
        help=f"record the session here (default: a new *{SUFFIX} under $XDG_STATE_HOME/tokentop/sessions)",
    )
    p.add_argument("--no-record", action="store_true", help="do not record this run's session")
    p.add_argument("--record-text", action="store_true", help="the session keeps the streamed text too")
    p.add_argument(
        "--label", metavar="NAME", default=EngineOptions.record_label, help="a name for this run's session"
    )


def sessions_dir() -> Path:
    """Where sessions go by default (tokentop never deletes any)."""
    return state_dir() / "sessions"


def find_run(name: str, folder: Path | None = None) -> Path:
    """A run given to compare: a path that exists, else a session in the sessions folder by its file name
    (as `tokentop sessions` lists it, with or without the suffix) or by its label (the newest of that
    label); a `UsageError` naming where it looked otherwise."""
    path = Path(name)
    if path.exists() or path.parent != Path("."):
        return path
    folder = folder or sessions_dir()
    for candidate in (folder / name, folder / f"{name}{SUFFIX}"):
        if candidate.is_file():
            return candidate
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:60]
    labelled = re.compile(rf"\d{{8}}-\d{{6}}-{re.escape(safe)}(-\d+)?{re.escape(SUFFIX)}")
    found = sorted(p for p in folder.glob(f"*{SUFFIX}") if labelled.fullmatch(p.name)) if safe else []
    if not found:
        raise UsageError(f"{name}: no such file, and no session of that name or label in {folder}")
    return found[-1]


def find_runs(name: str, folder: Path | None = None) -> tuple[Path, ...]:
    """`find_run`, and where ``name`` is a label whose newest session is one of a ``bench --repeat`` set,
    every session of that set in the folder (one side of a comparison: its repeats). A path, or a file
    name, is that one run."""
    from tui.engine.recording.file import read_header, session_files

    path = find_run(name, folder)
    if path.name in (name, f"{name}{SUFFIX}") or Path(name).parent != Path("."):
        return (path,)
    header = read_header(path) or {}
    the_set = header.get("repeat")
    if not the_set:
        return (path,)
    same = [p for p in session_files(path.parent) if (read_header(p) or {}).get("repeat") == the_set]
    return tuple(same) or (path,)


def default_session_path(label: str, *, now_s: float | None = None, folder: Path | None = None) -> Path:
    """A new file name: ``YYYYmmdd-HHMMSS[-label]``, with ``-2``, ``-3``... if taken."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now_s is None else now_s))
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.")[:60]
    base = f"{stamp}-{safe}" if safe else stamp
    folder = folder or sessions_dir()
    path = folder / f"{base}{SUFFIX}"
    n = 2
    while path.exists():
        path = folder / f"{base}-{n}{SUFFIX}"
        n += 1
    return path


def record_from_args(ns: argparse.Namespace) -> dict[str, Any]:
    """The `EngineOptions` fields for recording (``record`` None with ``--no-record``); the default folder
    is made here, and a --record path that cannot be created fails in one line before any load."""
    if ns.no_record:
        if ns.record:
            raise UsageError("--record and --no-record contradict each other")
        return {"record": None}
    label: str = ns.label
    text: bool = ns.record_text
    given: str | None = ns.record
    if given:
        path = Path(given)
        if path.exists():
            raise UsageError(f"--record: {path} exists (a session is never overwritten)")
        if not path.parent.is_dir():
            raise UsageError(f"--record: directory does not exist: {path.parent}")
    else:
        folder = sessions_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot make the sessions folder {folder}: {exc.strerror or exc}") from None
        path = default_session_path(label, folder=folder)
    return {"record": str(path), "record_text": text, "record_label": label}


def schedule_from_args(ns: argparse.Namespace, *, levels: bool, ends: bool = False) -> Schedule | None:
    """``--schedule SESSION``'s schedule, or None; a file that is not a session, or a schedule given with
    levels of its own (``levels``: the command's ``--concurrency``/``--rate`` were given) or with their own
    ends (``ends``: bench's ``--duration``/``--requests``), is a usage error in one line."""
    path: str | None = ns.schedule
    if not path:
        return None
    if levels:
        raise UsageError("--schedule runs the session's own levels: leave out --concurrency and --rate")
    if ends:
        raise UsageError(
            "--schedule holds each level for its recorded time: leave out --duration and --requests"
        )
    from tui.engine.recording.file import SessionError
    from tui.engine.sessions.schedule import read_schedule

    try:
        return read_schedule(Path(path))
    except SessionError as exc:
        raise UsageError(f"--schedule: {exc}") from None


def add_schedule_arg(p: argparse.ArgumentParser) -> None:
    """--schedule SESSION (live and bench)."""
    p.add_argument(
        "--schedule",
        metavar="SESSION",
        help="run a recorded session's load levels again, each for its recorded time, against this server",
    )


def add_baseline_arg(p: argparse.ArgumentParser) -> None:
    """--baseline SESSION_OR_RESULTS (live)."""
    p.add_argument(
        "--baseline",
        metavar="SESSION_OR_RESULTS",
        help="draw this earlier run's curve beside the live one; each level row shows its change from it",
    )


def baseline_from_args(ns: argparse.Namespace) -> Baseline | None:
    """``--baseline``'s levels, or None; a file that is neither a session nor results is one line."""
    path: str | None = ns.baseline
    if not path:
        return None
    from tui.engine.recording.file import SessionError
    from tui.engine.sessions.baseline import Baseline

    try:
        return Baseline.load(Path(path))
    except SessionError as exc:
        raise UsageError(f"--baseline: {exc}") from None
