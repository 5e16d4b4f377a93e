"""`bench --live-jsonl`: the run as JSON lines, for CI jobs, notebooks and dashboards that follow it.

Each line is one object whose ``event`` says what it holds, its figures under the results' own keys
(`tui.engine.results.model`, written by its codec):

- ``tick``, once a second: ``run_s``, ``in_flight`` and ``level``, the current level as the results write a
  level, from the face's snapshot (no histograms or server figures: those come with its ``level`` line);
- ``level``: a level that has ended and whose last requests are in, as the results had it then;
- ``results``, the last line: the results document, exactly what ``--output`` saves.

Each line is flushed as it is written. A write that fails (a closed pipe, a full disk) stops the feed with
one line on stderr; the run goes on and writes its results, and bench exits 1 (an output is incomplete).
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import IO, Any

import orjson

from tui.configs import UsageError
from tui.engine.api import Engine
from tui.engine.config import LoadTarget
from tui.engine.recording.file import WHY
from tui.engine.results.build import LevelExtras, level_of
from tui.engine.results.codec import encode
from tui.engine.results.model import Level, Results
from tui.engine.snapshot import LevelView, Snapshot
from tui.terminal import say, silence_stdout

STDOUT = "-"
TICK_S = 1.0
"""A tick line at most this often."""


class LiveFeed:
    """The feed's file (or stdout), its lines and its one failure."""

    def __init__(self, where: str, file: IO[bytes] | None = None) -> None:
        """``where``: a path, or ``-`` for stdout; ``file``: where the bytes go instead (a test's)."""
        self.where = where
        self.error: str | None = None
        """Why the feed stopped, once a write failed."""
        self._last_tick = -float("inf")
        self._said: set[int] = set()
        """The levels whose ``level`` line is written."""
        if file is not None:
            self._file: IO[bytes] | None = file
        elif where == STDOUT:
            self._file = sys.stdout.buffer
        else:
            try:  # closed in close(); opened before any load, so a bad path costs no run
                self._file = open(Path(where), "wb", buffering=0)  # noqa: SIM115
            except OSError as exc:
                raise UsageError(f"--live-jsonl: cannot write {where}: {exc.strerror or exc}") from None

    @property
    def to_stdout(self) -> bool:
        """The feed is stdout's, so nothing else may print there (bench's table goes to stderr)."""
        return self.where == STDOUT

    def tick(
        self, snap: Snapshot, lv: LevelView | None, load: LoadTarget, cost_per_hour: float | None
    ) -> None:
        """The current level's figures, if a second has passed since the last tick."""
        now = time.monotonic()
        if lv is None or now - self._last_tick < TICK_S:
            return
        self._last_tick = now
        level = level_of(lv, LevelExtras(), load, None, cost_per_hour)
        self._write(
            {"event": "tick", "run_s": snap.elapsed_s, "in_flight": snap.in_flight, "level": encode(level)}
        )

    def level(self, results: Results, level_id: int) -> None:
        """A level's line from ``results``, once per level."""
        found = next((lv for lv in results.levels if lv.level_id == level_id), None)
        if found is not None and level_id not in self._said:
            self._said.add(level_id)
            self._level(found)

    def level_ended(self, engine: Engine) -> None:
        """The level ``engine`` just wound down, as its results have it now (all its requests are in)."""
        results = engine.results()
        if isinstance(results, Results):
            self.level(results, engine.level_id)

    def results(self, results: Results) -> None:
        """The end: a line for each level not yet said (the last, a cut one), then the document."""
        for lv in results.levels:
            if lv.level_id not in self._said:
                self._said.add(lv.level_id)
                self._level(lv)
        self._write({"event": "results", "results": encode(results)})

    def _level(self, level: Level) -> None:
        self._write({"event": "level", "level": encode(level)})

    def _write(self, line: dict[str, Any]) -> None:
        if self._file is None:
            return
        try:
            self._file.write(
                orjson.dumps(line, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE)
            )
            self._file.flush()
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        """Stop the feed for good and say why in one line; a closed stdout is pointed at /dev/null."""
        errno = getattr(exc, "errno", None)
        why = "its reader has gone" if isinstance(exc, BrokenPipeError) else WHY.get(errno or 0, str(exc))
        self.error = f"--live-jsonl {self.where}: cannot write ({why}): the feed stopped, the run went on"
        say(f"tokentop: error: {self.error}")
        if self.to_stdout:
            silence_stdout()
        else:
            self.close()
        self._file = None

    def close(self) -> None:
        if self._file is not None and not self.to_stdout:
            with contextlib.suppress(OSError):
                self._file.close()
        self._file = None
