"""The recording flags of the faces that run load (live, bench) and where a session goes by default: one
file per run under ``state_dir()/sessions``, named by its date, time and ``--label``."""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.engine.config import EngineOptions
from tui.engine.sessions.file import SUFFIX
from tui.engine.sessions.schedule import Schedule

if TYPE_CHECKING:
    from tui.engine.sessions.baseline import Baseline
from tui.options import UsageError, engine_options_from_args
from tui.outputs import state_dir


def add_record_args(p: argparse.ArgumentParser) -> None:
    """--record, --no-record, --record-text, --label."""
    p.add_argument(
        "--record",
        metavar="PATH",
        help=f"record the session here (default: a new *{SUFFIX} under $XDG_STATE_HOME/tokentop/sessions)",
    )
    p.add_argument("--no-record", action="store_true", help="do not record this run's session")
    p.add_argument("--record-text", action="store_true", help="the session keeps the streamed text too")
    p.add_argument("--label", metavar="NAME", default="", help="a name for this run's session")


def recording_engine_options(ns: argparse.Namespace) -> EngineOptions:
    """`engine_options_from_args` with the recording flags (``--record``, ``--no-record``, ...) applied."""
    return replace(engine_options_from_args(ns), **record_from_args(ns))


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
    if getattr(ns, "no_record", False):
        if getattr(ns, "record", None):
            raise UsageError("--record and --no-record contradict each other")
        return {"record": None}
    label = getattr(ns, "label", "") or ""
    text = bool(getattr(ns, "record_text", False))
    given = getattr(ns, "record", None)
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


def schedule_from_args(ns: argparse.Namespace) -> Schedule | None:
    """``--schedule SESSION``'s schedule, or None; a file that is not a session, or a schedule given with
    levels of its own (``--concurrency``/``--rate``), is a usage error in one line."""
    path = getattr(ns, "schedule", None)
    if not path:
        return None
    if getattr(ns, "concurrency", None) or getattr(ns, "rate", None):
        raise UsageError("--schedule runs the session's own levels: leave out --concurrency and --rate")
    if getattr(ns, "duration", None) or getattr(ns, "requests", None):
        raise UsageError(
            "--schedule holds each level for its recorded time: leave out --duration and --requests"
        )
    from tui.engine.sessions.file import SessionError
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
    path = getattr(ns, "baseline", None)
    if not path:
        return None
    from tui.engine.sessions.baseline import Baseline
    from tui.engine.sessions.file import SessionError

    try:
        return Baseline.load(Path(path))
    except SessionError as exc:
        raise UsageError(f"--baseline: {exc}") from None
