"""A worker's trace pacing: its share of a trace's requests, each sent at its own time on the trace's
timeline, which the speed knob bends without a jump.

The handle anchors the timeline for all workers alike (`tui.engine.load.split.TracePlace`: at
``anchor_ns``, the replay is ``pos_ns`` into the trace) and each request at trace time t is due at
``anchor + (t - pos) / speed``. A new speed re-anchors where the replay is, so nothing is skipped or sent
twice: the request this worker was waiting on keeps its place and is simply due sooner or later. A new
epoch (bench's sweep, a level played from the start) opens the trace again and skips to ``pos_ns``.

Sends are stamped against their schedule as every open-loop arrival's (`RequestRecord.scheduled_ns`); a
worker that falls more than `BEHIND_MS` behind says so, at most once every `BEHIND_NOTICE_S`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator

from tui.engine.config import TraceConfig
from tui.engine.traces import TraceError, TraceFeed, TraceRequest
from tui.engine.wire import WorkerShare

BEHIND_MS = 10.0
"""A send this late against its schedule means this client cannot keep up with the trace at this speed."""
BEHIND_NOTICE_S = 10.0
LEAD_NS = 3_000_000
"""A request is started this long before its time: its prompt and body are built by then, and the client
holds it to the moment (`tui.engine.stream.hold.wait_until_ns`), so building costs the schedule nothing."""


WARM_CONNECTIONS = 2
"""Connections a worker opens when a pass of the trace begins, before its first send (each worker's
requests in flight at once, at the speeds the tests and benchmarks play; the pool grows past it as needed)."""

SendFn = Callable[[WorkerShare, int, TraceRequest], Awaitable[None]]
"""Sends one due request: (share, scheduled ns, entry)."""
WarmFn = Callable[[int], Awaitable[object]]
"""Opens that many connections ahead of the requests that will use them."""


class TracePacer:
    """One worker's pacing of a trace, kept across shares (a new speed keeps the file position)."""

    def __init__(
        self,
        trace: TraceConfig,
        *,
        worker: int = 0,
        workers: int = 1,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.trace = trace
        self.worker = worker
        self.workers = workers
        self._notice = notice or (lambda _message: None)
        self._warming: asyncio.Task[object] | None = None
        self._feed: Iterator[TraceRequest] | None = None
        self._epoch = -1
        self._pending: TraceRequest | None = None
        self._behind_said_ns = 0
        self.sent = 0
        """Requests sent over the whole run (all epochs)."""
        self.ended = False
        """The trace (this epoch's pass of it) has no more requests for this worker."""

    def _open(self, epoch: int) -> None:
        feed = TraceFeed(self.trace, worker=self.worker, workers=self.workers, notice=self._notice)
        self._feed = iter(feed)
        self._epoch = epoch
        self._pending = None
        self.ended = False

    def _next(self) -> TraceRequest | None:
        if self._pending is None and self._feed is not None:
            try:
                self._pending = next(self._feed, None)
            except TraceError as exc:
                self._notice(f"trace replay stopped: {exc}")
                self._feed = None
        return self._pending

    async def run(self, share: WorkerShare, send: SendFn, warm: WarmFn | None = None) -> None:
        """Send this worker's requests as they fall due on ``share``'s timeline, until the trace ends (or
        the task is cancelled by the next share). ``warm``: opens connections; a new pass of the trace
        starts it at once, so the first sends find their connections open."""
        anchor = share.trace_anchor_ns
        if anchor is None:
            return
        fresh = share.trace_epoch != self._epoch
        if fresh:
            self._open(share.trace_epoch)
            if warm is not None and (self._warming is None or self._warming.done()):
                # a task of its own: a share that replaces this one must not cancel the connects half-way
                self._warming = asyncio.ensure_future(warm(WARM_CONNECTIONS))
        pos, speed = share.trace_pos_ns, max(share.speed, 1e-6)
        while True:
            entry = self._next()
            if entry is None:
                if not self.ended and self.worker == 0:
                    self._notice(f"trace replay reached the end of {self.trace.path}")
                self.ended = True
                return
            if fresh and entry.at_ns < pos:
                self._pending = None  # before the place an epoch starts from
                continue
            due_ns = anchor + round((entry.at_ns - pos) / speed)
            wait_ns = due_ns - LEAD_NS - time.perf_counter_ns()
            # behind, still yield once a request: a replay catching up must not starve the worker's batches
            await asyncio.sleep(max(0.0, wait_ns / 1e9))
            self._say_if_behind(time.perf_counter_ns() - due_ns)
            await send(share, due_ns, entry)  # cancelled in the cap's wait: still pending, sent next run
            self._pending = None
            self.sent += 1

    def _say_if_behind(self, late_ns: int) -> None:
        if late_ns < BEHIND_MS * 1e6:
            return
        now = time.perf_counter_ns()
        if now - self._behind_said_ns < BEHIND_NOTICE_S * 1e9 and self._behind_said_ns:
            return
        self._behind_said_ns = now
        self._notice(
            f"trace replay falling behind: worker {self.worker} sent a request {late_ns / 1e6:.0f} ms after "
            "its time (this client cannot keep up at this speed: more --workers, or a lower speed)"
        )
