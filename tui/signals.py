"""Ending a face on purpose: SIGTERM and SIGHUP handled like Ctrl-C (a stdout nobody reads any more is
`tui.terminal`'s).

SIGTERM is what ``timeout``, ``docker stop``, systemd, Kubernetes and CI cancellation send; SIGHUP what a
closed terminal or ssh session sends. Python's default for both is to die at once, losing what was measured
and leaving the terminal raw. Here both raise `Terminated`, a `KeyboardInterrupt`, so the path that Ctrl-C
already takes (in-flight requests cancelled and recorded, results written, children stopped) is the one
path for every signal; only the exit status differs (128 + the signal's number: 130, 143, 129, as shells
report a death by that signal).

Shared by the faces (bench, the live app), like `tui.demo`; imports nothing of theirs.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals turned into `Terminated` (SIGINT already raises KeyboardInterrupt)."""
SIGNAL_STATUSES = {128 + sig: signal.Signals(sig).name for sig in HANDLED_SIGNALS}
"""Exit status -> the name of the signal that caused it (143: SIGTERM, 129: SIGHUP)."""


class Terminated(KeyboardInterrupt):
    """A signal asked the face to end: handled wherever KeyboardInterrupt is, with its own exit status."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_status(exc: BaseException | None = None) -> int:
    """The exit status for an interrupt: 128 + its signal number (130 for Ctrl-C's KeyboardInterrupt)."""
    if isinstance(exc, Terminated):
        return 128 + exc.signum
    return 128 + signal.SIGINT


@contextlib.contextmanager
def signals_as_interrupt(on_signal: Callable[[int], None] | None = None) -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise `Terminated` in the main thread (or call ``on_signal``,
    for a face whose main thread runs an event loop that must be asked to stop instead). Only the first one
    counts: a second signal during the clean-up it started would cut that clean-up short, which is what the
    handler exists to prevent (the clean-up is bounded; SIGKILL remains). Restored when the block ends."""
    fired = False

    def handler(signum: int, _frame: FrameType | None) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        if on_signal is not None:
            on_signal(signum)
            return
        raise Terminated(signum)

    previous: dict[signal.Signals, object] = {}
    try:
        for sig in HANDLED_SIGNALS:
            with contextlib.suppress(ValueError, OSError):  # not the main thread (a test): leave them
                previous[sig] = signal.signal(sig, handler)
        yield
    finally:
        for restored, old in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(restored, old)  # type: ignore[arg-type]
