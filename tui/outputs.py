"""Output paths checked before the run: an unwritable ``--output``, ``--requests-log``, ``--csv``, ``--plot``,
``--vllm-results`` or ``--server-metrics-log`` fails in one line (exit 2) before any load is sent, instead
of after the whole run, with the results lost. And where results go when no path was asked for.

The checks try what the run will do, because permission bits say little (root ignores them, a read-only
mount does not show in them): the requests log is opened for appending (the engine appends to it), and for
the results file the temporary file that `write_results` writes beside it and renames is created and
removed. Shared by the faces, like `tui.demo`.
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from pathlib import Path

from tui.configs import UsageError


def state_dir() -> Path:
    """Where tokentop keeps what it records without being asked: ``$XDG_STATE_HOME/tokentop``, else
    ``~/.local/state/tokentop`` (the XDG base directory rules). Not created here."""
    xdg = os.environ.get("XDG_STATE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "tokentop"


def kept_results_path(now: datetime | None = None) -> Path:
    """A new file for results nobody asked a path for: ``state_dir()/results/tokentop-YYYYmmdd-HHMMSS.json``
    (``-2``, ``-3``, ... if that second is taken); its folder is created."""
    folder = state_dir() / "results"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    path, n = folder / f"tokentop-{stamp}.json", 1
    while path.exists():
        n += 1
        path = folder / f"tokentop-{stamp}-{n}.json"
    return path


def check_outputs(
    *,
    output: Path | None,
    requests_log: Path | None,
    server_metrics_log: Path | None = None,
    csv: Path | None = None,
    vllm_results: Path | None = None,
    plot: Path | None = None,
) -> None:
    """Raise `UsageError` (one line naming the flag and the path) if any of them cannot be written."""
    if requests_log is not None:
        _check_appendable("--requests-log", requests_log)
    if server_metrics_log is not None:
        _check_appendable("--server-metrics-log", server_metrics_log)
    if output is not None:
        _check_replaceable("--output", output)
    if csv is not None:
        _check_replaceable("--csv", csv)
    if plot is not None:
        if plot.suffix.lower() != ".svg":
            raise UsageError(f"--plot writes SVG: name the file .svg, not {plot.name}")
        _check_replaceable("--plot", plot)
    if vllm_results is not None:
        _check_folder("--vllm-results", vllm_results)


def _check_dir(flag: str, path: Path) -> None:
    parent = path.parent
    if not parent.exists():
        raise UsageError(f"{flag}: directory does not exist: {parent}")
    if not parent.is_dir():
        raise UsageError(f"{flag}: not a directory: {parent}")
    if path.is_dir():
        raise UsageError(f"{flag}: is a directory: {path}")


def _check_folder(flag: str, path: Path) -> None:
    """A folder that exists and takes new files, or one that can be made in a folder that exists."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag}: not a directory: {path}")
    if not path.parent.exists():
        raise UsageError(f"{flag}: directory does not exist: {path.parent}")
    made = not path.exists()
    try:
        if made:
            path.mkdir()
        _check_replaceable(flag, path / ".tokentop-check")
    except OSError as exc:
        raise UsageError(f"{flag}: cannot write in {path}: {exc.strerror or exc}") from None
    finally:
        if made:
            with contextlib.suppress(OSError):
                path.rmdir()


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
