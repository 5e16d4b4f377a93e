"""The app's terminal driver: Textual's own, except that a terminal that has gone cannot hang the app.

After a hang-up (a closed window, an ssh drop, ``tmux kill-session``) every write to the terminal fails
with EIO. Textual's writer thread dies on the first one; its queue (30 writes) then fills, and the next
write, or the ``stop()`` that joins the thread on exit, blocks for ever. Here the writer's file drops
writes once the terminal has failed one, so the thread keeps draining and the app can quit.
"""

from __future__ import annotations

import io
from typing import Any, TextIO

from textual.drivers.linux_driver import LinuxDriver


class GoneTerminalFile(io.TextIOBase):
    """``file`` for Textual's writer thread: writes and flushes pass through until one fails (the terminal
    has gone); after that, everything written is dropped."""

    def __init__(self, file: TextIO) -> None:
        super().__init__()
        self._file = file
        self.gone = False
        """Whether a write or flush failed (the terminal hung up); nothing is written after that."""

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self._file.write(text)
            except (OSError, ValueError):
                self.gone = True
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._file.flush()
            except (OSError, ValueError):
                self.gone = True

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        return True


class HangUpSafeDriver(LinuxDriver):
    """Textual's Linux driver writing through a `GoneTerminalFile`."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        if self._file is not None:
            self._file = GoneTerminalFile(self._file)  # type: ignore[assignment]  # a file, as it needs
