"""`SessionRecorder`: what the engine's handle writes to its session as the run goes. Each worker `Batch`
is written as the handle ingests it, in the same order as the level changes, so a fresh `Store` fed the
same events on the recorded clock holds the same figures (`tui.engine.host.playback_engine`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from tui import __version__
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.recording.batch_line import batch_encoder, batch_tail, encode_batch
from tui.engine.recording.file import Lost, SessionWriter
from tui.engine.recording.plain_json import recordable_classes
from tui.engine.wire import Batch

BATCH_HEAD = b'{"k":"b","t":'
"""A batch event's line up to its time."""
SECRETS = {"TargetConfig": ("api_key",)}
"""Never written: the API key (the header names are kept, their values are not: see `_safe_target`)."""


def _safe_target(target: TargetConfig) -> TargetConfig:
    from dataclasses import replace

    return replace(target, api_key=None, headers=tuple((name, "") for name, _ in target.headers))


class SessionRecorder:
    """One run's session: the header at start, then events; `close` ends it. Writes never raise: a failed
    write stops the recording (`error` says why) and the run goes on."""

    def __init__(
        self,
        path: Path,
        *,
        target: TargetConfig,
        workload: WorkloadConfig,
        load: LoadTarget,
        options: EngineOptions,
        workers: int,
        t0_ns: int,
        started_at_s: float,
        file: IO[bytes] | None = None,
    ) -> None:
        """``file``: where the session's bytes go instead of a new file at ``path`` (a test's failing
        disk)."""
        self._enc = batch_encoder(options.record_text, SECRETS)
        config = {
            "target": self._enc.encode(_safe_target(target)),
            "workload": self._enc.encode(workload),
            "load": self._enc.encode(load),
            "options": self._enc.encode(options),
            "workers": workers,
        }
        # the schema of every class a batch can hold (any added later too), known before the first batch
        for cls in recordable_classes():
            self._enc.schema.setdefault(cls.__name__, _field_names(cls))
        header = {
            "tokentop": __version__,
            "label": options.record_label,
            **({"repeat": options.record_repeat} if options.record_repeat else {}),
            "started_at_s": started_at_s,
            "t0_ns": t0_ns,
            "url": target.base_url,
            "config": config,
            "schema": self._enc.schema,
        }
        from tui.engine.redact import display_url

        header["url"] = display_url(target.base_url)
        self._writer = SessionWriter(path, header, file)
        self.path = path
        self._lock = threading.Lock()
        self._ticker_stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="tokentop-session-flush", daemon=True)
        self._ticker.start()

    @property
    def error(self) -> str | None:
        return self._writer.error

    @property
    def lost(self) -> Lost | None:
        """What a failed write cost the session (`SessionWriter.lost`), once one did."""
        return self._writer.lost

    def _tick(self) -> None:
        while not self._ticker_stop.wait(0.5):
            self._writer.flush_if_due()

    def _event(self, kind: str, t_ns: int, **data: Any) -> None:
        self._writer.write({"k": kind, "t": t_ns, **data})

    def batch(self, batch: Batch) -> None:
        """A worker batch, as the handle ingests it now (field names in the header's schema): the line its
        worker deflated (`Batch.session`), else encoded here, the same way (`encode_batch`)."""
        if batch.session is not None:
            self._writer.write_piece(BATCH_HEAD, time.perf_counter_ns(), batch.session)
        else:
            tail = batch_tail(encode_batch(self._enc, batch))
            self._writer.write_raw(BATCH_HEAD, time.perf_counter_ns(), tail)

    def views(self, t_ns: int, force: bool) -> None:
        """The store published new views computed at ``t_ns`` (`Store.on_views`), kept as ``at``: the
        event's ``t`` may be moved later (a scrape stamped while they were computed was written first)."""
        if force:
            self._event("v", t_ns, at=t_ns, force=True)
        else:
            self._event("v", t_ns, at=t_ns)

    def level(self, op: str, t_ns: int, level_id: int = 0, target: LoadTarget | None = None) -> None:
        """``begin`` (a new level at ``target``) or ``end`` (the current level ends: pause, stop)."""
        extra: dict[str, Any] = {}
        if target is not None:
            extra = {"id": level_id, "target": self._enc.encode(target)}
        self._event("level", t_ns, op=op, **extra)

    def load(self, t_ns: int, target: LoadTarget) -> None:
        """The target as set (also a pause, which starts no level)."""
        self._event("load", t_ns, target=self._enc.encode(target))

    def model(self, t_ns: int, model: str) -> None:
        self._event("model", t_ns, model=model)

    def workload(self, t_ns: int, workload: WorkloadConfig) -> None:
        """The workload after the ISL probe calibrated it (what the results describe)."""
        self._event("workload", t_ns, workload=self._enc.encode(workload))

    def lose_workers(self, t_ns: int, workers: list[int], at_ns: int, cause: str) -> None:
        """Workers gone at ``at_ns`` (`Store.lose_workers`), and why: their node, or a signal."""
        self._event("lost", t_ns, workers=workers, at=at_ns, cause=cause)

    def notice(self, t_ns: int, text: str) -> None:
        self._event("notice", t_ns, text=text)

    def mark(self, t_ns: int, label: str) -> None:
        self._writer.write({"k": "mark", "t": t_ns, "label": label}, flush=True)

    def scrape(self, t_ns: int, text: str, gpu: Mapping[str, float]) -> None:
        """The server's ``/metrics`` body as scraped at ``t_ns``, with the GPU gauges read beside it (the
        server pane replays from them)."""
        if gpu:
            self._event("scrape", time.perf_counter_ns(), at=t_ns, text=text, gpu=dict(gpu))
        else:
            self._event("scrape", time.perf_counter_ns(), at=t_ns, text=text)

    def fatal(self, t_ns: int, text: str) -> None:
        self._event("fatal", t_ns, text=text)

    def results(self, doc: dict[str, Any]) -> None:
        self._event("results", time.perf_counter_ns(), doc=doc)

    def finish(self, fatal: str | None, results: Callable[[], dict[str, Any]]) -> str | None:
        """After the run: its fatal line (if any), its ``results`` document and the end marker, then close;
        why the recording failed, or None."""
        if fatal:
            self.fatal(time.perf_counter_ns(), fatal)
        try:
            self.results(results())
        finally:
            self.close()
        return self.error

    def close(self) -> None:
        """Write the end marker and finish the file. Idempotent."""
        with self._lock:
            if self._ticker_stop.is_set():
                return
            self._ticker_stop.set()
        self._writer.write({"k": "end", "t": time.perf_counter_ns()})
        self._writer.close()


def open_recorder(
    options: EngineOptions,
    *,
    target: TargetConfig,
    workload: WorkloadConfig,
    load: LoadTarget,
    workers: int,
    t0_ns: int,
    started_at_s: float,
) -> tuple[SessionRecorder | None, str | None]:
    """The run's recorder when ``options.record`` asks for one, else None; a session that cannot be created
    is a notice (the second value), and the run goes on unrecorded."""
    if options.record is None:
        return None, None
    try:
        recorder = SessionRecorder(
            Path(options.record),
            target=target,
            workload=workload,
            load=load,
            options=options,
            workers=workers,
            t0_ns=t0_ns,
            started_at_s=started_at_s,
        )
    except OSError as exc:
        return None, f"cannot record the session {options.record}: {exc.strerror or exc}"
    return recorder, None


def _field_names(cls: type) -> list[str]:
    import dataclasses

    if hasattr(cls, "_fields"):
        return list(cls._fields)
    return [f.name for f in dataclasses.fields(cls)]
