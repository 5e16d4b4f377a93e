"""The run's ``--requests-log`` file: one JSON line per finished request, appended by the reader thread and
closed (so flushed) at stop. Its first failure (a full disk) is one line for the face to show; after it
the log takes nothing more and the load goes on."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui.engine.records import RequestRecord, RequestsLog


class RequestsLogFile:
    """Opened for appending at once: a path that cannot be opened fails the engine's `start`."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "ab")  # noqa: SIM115 - closed in close()
        self._log: RequestsLog | None = RequestsLog(self._file)

    def write(self, records: Sequence[RequestRecord]) -> str | None:
        """Append ``records``; the one-line reason the first time writing fails (also when the file was
        closed meanwhile), else None."""
        log = self._log
        if log is None:
            return None
        try:
            for rec in records:
                log.write(rec)
        except (OSError, ValueError) as exc:
            self._log = None
            return f"cannot write the requests log: {exc}"
        return None

    def write_canary(self, line: dict[str, Any]) -> str | None:
        """Append a canary request's line (`tui.engine.host.canary`), marked ``"canary": true`` (its level 0
        is none of the load's); the reason the first time writing fails, else None."""
        log = self._log
        if log is None:
            return None
        try:
            log.write_json({**line, "canary": True})
        except (OSError, ValueError) as exc:
            self._log = None
            return f"cannot write the requests log: {exc}"
        return None

    def close(self) -> str | None:
        """Close the file (it flushes: that may fail on a full disk); the one-line reason, or None."""
        self._log = None
        try:
            self._file.close()
        except OSError as exc:
            return f"cannot write the requests log: {exc}"
        return None
