"""Output paths checked before the run: an unwritable ``--output`` or ``--requests-log`` fails in one line
(exit 2) before any load is sent, instead of as a traceback after the whole run, with the results lost.

The checks try what the run will do, because permission bits say little (root ignores them, a read-only
mount does not show in them): the requests log is opened for appending (the engine appends to it), and for
the results file the temporary file that `write_results` writes beside it and renames is created and
removed. Shared by the faces, like `tui.demo`.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tui.options import UsageError


def check_outputs(*, output: Path | None, requests_log: Path | None) -> None:
    """Raise `UsageError` (one line naming the flag and the path) if either cannot be written."""
    if requests_log is not None:
        _check_appendable("--requests-log", requests_log)
    if output is not None:
        _check_replaceable("--output", output)


def _check_dir(flag: str, path: Path) -> None:
    parent = path.parent
    if not parent.exists():
        raise UsageError(f"{flag}: directory does not exist: {parent}")
    if not parent.is_dir():
        raise UsageError(f"{flag}: not a directory: {parent}")
    if path.is_dir():
        raise UsageError(f"{flag}: is a directory: {path}")


def _check_appendable(flag: str, path: Path) -> None:
    _check_dir(flag, path)
    existed = path.exists()
    try:
        with open(path, "ab"):
            pass  # appending nothing leaves an existing log as it was
    except OSError as exc:
        raise UsageError(f"{flag}: cannot write {path}: {exc.strerror or exc}") from None
    if not existed:
        with contextlib.suppress(OSError):
            path.unlink()  # the engine creates it when the run starts; none is left by a failed start


def _check_replaceable(flag: str, path: Path) -> None:
    _check_dir(flag, path)
    probe = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return  # a leftover of an earlier run: the writer replaces it
    except OSError as exc:
        raise UsageError(f"{flag}: cannot write in {path.parent}: {exc.strerror or exc}") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        probe.unlink()


def state_dir() -> Path:
    """Where tokentop keeps what it records between runs: ``$XDG_STATE_HOME/tokentop``, else
    ``~/.local/state/tokentop`` (the XDG base directory rule)."""
    base = os.environ.get("XDG_STATE_HOME")
    return (Path(base) if base else Path.home() / ".local" / "state") / "tokentop"
