"""Writing to a terminal that may have gone: a stdout whose reader left (``| head``), a stderr closed with
its terminal (SIGHUP). Such a write must end the run cleanly, not with a traceback that skips writing the
results. Shared by the faces, like `tui.signals`."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TextIO


def print_or_drop(text: str) -> bool:
    """Print ``text`` to stdout; False, and stdout silenced for good, if its reader has gone (``| head``).

    A broken pipe must end the run cleanly, not with a traceback that skips writing the results: stdout is
    pointed at /dev/null so nothing later (including the interpreter's final flush) trips over it again."""
    try:
        print(text, flush=True)
        return True
    except BrokenPipeError:
        silence_stdout()
        return False


def silence_stdout() -> None:
    """Point stdout's file descriptor at /dev/null (its reader has gone)."""
    silence(sys.stdout)


def silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null, so every later write to it (ours, a library's, the
    interpreter's final flush) succeeds into nothing instead of raising BrokenPipeError."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def say(text: str) -> None:
    """One line to stderr, or nothing if stderr itself has gone (a closed terminal after SIGHUP)."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)
