"""`PlaybackEngine`: the `tui.engine.api.Engine` of a recorded session, with no server. It feeds the
session's events (worker batches, level changes, scrapes) into a fresh `Store` and scrape view on the
recorded clock, so what a face shows at a moment of the recording is what the live face showed then.

The clock plays at a speed (paused, x1, x2, ...) and seeks: forward by feeding events, backward by
starting again from the first event (the store only ever moves forward, as it did live).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.engine.aggregate.lost import NODE_LOST_ERROR
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.run_core import RUN_READS, RunCore, new_store, write_results
from tui.engine.host.server_scrape import SERVER_HISTORY
from tui.engine.recording.file import Session, SessionError
from tui.engine.recording.plain_json import Decoder
from tui.engine.recording.stamps import LaneStamps, record_index
from tui.engine.snapshot import RampVerdict, RequestDetail, Snapshot

if TYPE_CHECKING:
    from tui.engine.results.model import Results

SPEEDS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


class SessionConfig:
    """The run's configuration as the session's header recorded it."""

    def __init__(self, session: Session) -> None:
        header = session.header
        self.decoder = Decoder(header.get("schema", {}))
        config = header.get("config", {})
        try:
            self.target: TargetConfig = self.decoder.decode(config["target"])
            self.workload: WorkloadConfig = self.decoder.decode(config["workload"])
            self.load: LoadTarget = self.decoder.decode(config["load"])
            self.options: EngineOptions = self.decoder.decode(config["options"])
            self.workers = int(config["workers"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SessionError(f"{session.path}: the session's header is unreadable ({exc})") from None
        self.t0_ns = int(header["t0_ns"])
        self.started_at_s = float(header.get("started_at_s", 0.0))
        self.label = str(header.get("label", ""))


class PlaybackEngine:
    """Plays a session back as an engine: `snapshot` at the replay clock; `play`, `pause`, `seek`, `speed`."""

    def __init__(self, session: Session, *, wall_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        self.session = session
        self.config = SessionConfig(session)
        self.target = self.config.target
        self._wall_ns = wall_ns
        self._events = session.events
        self._times = [int(e["t"]) for e in self._events]
        self.marks: list[tuple[int, str]] = [(int(e["t"]), str(e["label"])) for e in session.of_kind("mark")]
        self.level_starts: list[tuple[int, int]] = [
            (int(e["t"]), int(e["id"])) for e in session.of_kind("level") if e.get("op") == "begin"
        ]
        self._records = record_index(session, self.config.decoder)
        self.end_ns = max(self._times[-1] if self._times else self.config.t0_ns, self.config.t0_ns)
        self.speed = 1.0
        self.playing = True
        self.stopped = False
        self._reset()
        self._anchor_wall = wall_ns()
        self._anchor_t = self.config.t0_ns

    # --- the replay clock --------------------------------------------------------------------------

    def _reset(self) -> None:
        """A fresh run core (store, scrape view, checks), before the first event."""
        cfg = self.config
        o = cfg.options
        self.core = RunCore(
            cfg.target, o, new_store(o, cfg.t0_ns, cfg.workers), cfg.load, workers=cfg.workers
        )
        from tui.engine.server_metrics.poller import ServerMetricsPoller

        self._scraped = False
        self._poller = ServerMetricsPoller(
            cfg.target.base_url, metrics_url=o.metrics_url, history=SERVER_HISTORY
        )
        self.workload = cfg.workload
        self._stamps = LaneStamps(self._records, self.config.decoder)
        self._pos = 0
        self._now = cfg.t0_ns

    def now_ns(self) -> int:
        """The replay clock (the recording's ``perf_counter_ns``), advanced by the wall clock while
        playing."""
        if self.playing:
            wall = self._wall_ns()
            t = self._anchor_t + int((wall - self._anchor_wall) * self.speed)
            if t >= self.end_ns:
                t = self.end_ns
                self.playing = False
            self._advance(t)
        return self._now

    def _rebase(self) -> None:
        self._anchor_wall = self._wall_ns()
        self._anchor_t = self._now

    def play(self) -> None:
        if self._now >= self.end_ns:
            self.seek(self.config.t0_ns)
        self.playing = True
        self._rebase()

    def pause(self) -> None:
        self.now_ns()
        self.playing = False

    def toggle(self) -> None:
        if self.playing:
            self.pause()
        else:
            self.play()

    def set_speed(self, factor: float) -> float:
        """Multiply the speed by ``factor`` (kept within `SPEEDS`); returns the new speed."""
        self.now_ns()
        wanted = self.speed * factor
        self.speed = min(SPEEDS, key=lambda s: abs(s - wanted))
        self._rebase()
        return self.speed

    def seek(self, t_ns: int) -> None:
        """Move the clock to ``t_ns`` (clamped to the recording): forward by feeding the events between,
        backward by replaying from the start."""
        self.now_ns()
        t_ns = max(self.config.t0_ns, min(self.end_ns, t_ns))
        if t_ns < self._now:
            self._reset()
        self._advance(t_ns)
        self._rebase()

    def seek_by(self, seconds: float) -> None:
        self.seek(self.now_ns() + int(seconds * 1e9))

    def seek_level(self, step: int) -> int | None:
        """To the start of the next (``step`` 1) or previous (-1) level; its id, or None at either end."""
        found = self._seek_to([t for t, _ in self.level_starts], step, dict(self.level_starts))
        return None if found is None else int(found)

    def seek_mark(self, step: int) -> str | None:
        """To the next or previous mark; its label, or None when there is none that way."""
        found = self._seek_to([t for t, _ in self.marks], step, dict(self.marks))
        return None if found is None else str(found)

    def _seek_to(self, times: Sequence[int], step: int, what: dict[int, Any]) -> Any:
        now = self.now_ns()
        # back: before the one we are at (a second's grace, so a repeated key keeps going back)
        i = (
            bisect.bisect_right(times, now)
            if step > 0
            else bisect.bisect_left(times, now - 1_000_000_000) - 1
        )
        if not 0 <= i < len(times):
            return None
        self.seek(times[i])
        return what[times[i]]

    def run_to_end(self) -> PlaybackEngine:
        """Feed every event (for results and compare); stops the clock at the end."""
        self.playing = False
        self._advance(self.end_ns)
        return self

    def _advance(self, t_ns: int) -> None:
        events, times = self._events, self._times
        end = bisect.bisect_right(times, t_ns)
        for i in range(self._pos, end):
            self._apply(events[i])
        self._pos = max(self._pos, end)
        self._now = max(self._now, t_ns)

    def _apply(self, e: dict[str, Any]) -> None:
        kind = e.get("k")
        t = int(e["t"])
        decode = self.config.decoder
        core = self.core
        if kind == "b":
            core.store.ingest(self._stamps.restore(decode._build("Batch", e["b"])))
        elif kind == "v":  # computed "at" (its "t" may be later: a file's times never go back)
            core.store.refresh_views(int(e.get("at", t)), force=bool(e.get("force")))
        elif kind == "level":
            if e.get("op") == "begin":
                core.level_id = int(e["id"])
                core.load = decode.decode(e["target"])
                core.store.begin_level(core.level_id, core.load, t)
            else:
                core.store.end_level(t)
        elif kind == "load":
            core.load = decode.decode(e["target"])
        elif kind == "scrape":
            if not self._scraped:
                core.scrape.attach(self._poller)
                self._scraped = True
            self._poller.take(int(e.get("at", t)), str(e["text"]), e.get("gpu"))
        elif kind == "model":
            core.model = str(e["model"])
        elif kind == "workload":
            self.workload = decode.decode(e["workload"])
        elif kind == "lost":
            cause = str(e.get("cause", NODE_LOST_ERROR))  # older sessions: a lost node's wording
            core.store.lose_workers([int(w) for w in e["workers"]], int(e["at"]), cause)
        elif kind == "notice":
            core.store.add_notice(str(e["text"]))
        elif kind == "fatal":
            core.fatal = str(e["text"])

    # --- Engine protocol ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the clock (the recording is already open)."""
        self._rebase()

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        return True

    def set_load(self, target: LoadTarget) -> None:
        """A replay's load is the recording's: keys that set a load do nothing."""

    def record_ramp(self, verdict: RampVerdict) -> None:
        """A replay's ramp is the recording's: nothing to record."""

    load, level_id, model, fatal, t0_ns, server_view = RUN_READS
    """All as recorded, up to the replay clock."""

    def write_results(self, path: Path, *, interrupted: str | None = None) -> Path:
        return write_results(self.results(interrupted=interrupted), path)

    def snapshot(self) -> Snapshot:
        """The state at the replay clock, summarised as the live handle did, with the views it had computed
        by then (recomputed at the recorded moments, never here: a stopped engine's are its last ones)."""
        return self.core.snapshot(self.now_ns(), self.workload, cache=False)

    def detail(self, request_id: int) -> RequestDetail | None:
        return self.core.store.detail(request_id, self._now)

    def results(self, *, interrupted: str | None = None) -> Results:
        """The results document of what was recorded up to the replay clock."""
        info = self.core.run_info(self.workload, self.config.started_at_s)
        now = self.now_ns()
        return self.core.results(self.snapshot, info, interrupted=interrupted, now_ns=now)

    def stop(self, *, finish_in_flight: bool = False, timeout_s: float = 5.0) -> None:
        self.playing = False
        self.stopped = True

    def status(self) -> str:
        """One line for the status bar: where the replay is and how it plays."""
        at = (self._now - self.config.t0_ns) / 1e9
        total = (self.end_ns - self.config.t0_ns) / 1e9
        state = "▶" if self.playing else "⏸"
        cut = ", cut short" if self.session.cut else ""
        return f"replay {state} {at:.0f}/{total:.0f} s ×{self.speed:g}{cut}"


def open_playback(path: Path) -> PlaybackEngine:
    """The replay of the session at ``path`` (`SessionError` for a file that is not one)."""
    from tui.engine.recording.file import read_session

    return PlaybackEngine(read_session(path))


if TYPE_CHECKING:
    from tui.engine.api import Engine

    def _implements_engine(replay: PlaybackEngine) -> Engine:
        return replay  # mypy checks PlaybackEngine against the Engine protocol here
