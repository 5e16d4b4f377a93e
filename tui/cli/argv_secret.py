"""Hide a secret given on the command line (``--api-key K``) from the process list.

``/proc/PID/cmdline`` (what ``ps`` shows every user) is read from the process's own argv memory, which
CPython copies at start-up and never looks at again, and which it offers no API to change. On Linux the
kernel says where that memory is (``arg_start``/``arg_end`` in ``/proc/self/stat``), so the secret's bytes
can be overwritten in place with ctypes, as ``setproctitle`` does, with no dependency. The memory is
written only when it reads back exactly as ``/proc/self/cmdline`` says, so a layout this does not expect is
left alone (the caller then warns). `sys.argv` and `sys.orig_argv` are masked too: multiprocessing hands
`sys.argv` to every spawned worker.
"""

from __future__ import annotations

import sys
from pathlib import Path

MASK = b"*"


def hide_in_argv(secret: str) -> bool:
    """Overwrite ``secret`` wherever it is an argument (``K`` or ``--flag=K``) of this process, in the
    argv memory the kernel shows and in `sys.argv`/`sys.orig_argv`. True when the process list no longer
    shows it (or never did); False when it could not be hidden (not Linux, an unexpected layout)."""
    _mask_python_lists(secret)
    if not secret:
        return True
    try:
        return _mask_proc_cmdline(secret.encode())
    except (OSError, ValueError, IndexError):
        return False


def _masked(arg: str, secret: str) -> str:
    if arg == secret:
        return "*" * len(secret)
    if arg.endswith("=" + secret):
        return arg[: -len(secret)] + "*" * len(secret)
    return arg


def _mask_python_lists(secret: str) -> None:
    if not secret:
        return
    sys.argv[:] = [_masked(a, secret) for a in sys.argv]
    orig = getattr(sys, "orig_argv", None)
    if isinstance(orig, list):
        orig[:] = [_masked(a, secret) for a in orig]


def _mask_proc_cmdline(secret: bytes) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # only when there is a key to hide: `tokentop --help` stays light

    shown = Path("/proc/self/cmdline").read_bytes()
    spans = list(_secret_spans(shown, secret))
    if not spans:
        return True
    stat = Path("/proc/self/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # field 3 (state) onwards; comm may hold spaces
    arg_start, arg_end = int(fields[45]), int(fields[46])  # fields 48 and 49 (Linux 3.5+)
    if arg_start <= 0 or arg_end - arg_start != len(shown):
        return False
    if ctypes.string_at(arg_start, len(shown)) != shown:  # not where the kernel reads it: do not touch
        return False
    for offset, length in spans:
        ctypes.memmove(arg_start + offset, MASK * length, length)
    return not _secret_spans(Path("/proc/self/cmdline").read_bytes(), secret)


def _secret_spans(block: bytes, secret: bytes) -> list[tuple[int, int]]:
    """(offset, length) of the secret in each NUL-ended argument that is it or ends in ``=`` + it."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for arg in block.split(b"\0"):
        if arg == secret:
            spans.append((offset, len(secret)))
        elif arg.endswith(b"=" + secret):
            spans.append((offset + len(arg) - len(secret), len(secret)))
        offset += len(arg) + 1
    return spans
