"""The engine worker process: its own asyncio loop running the load generator and the HTTP client.

Talks to the handle over two one-way pipes, in the typed messages of `tui.engine.wire` (the whole wire is
there): in, commands (`ApplyShare`, `Stop`); out, every ``batch_interval_s`` one `Batch` of what was measured
since the last (lane deltas of the live streams, finished records, health readings), and finally `Goodbye`
(after a `WorkerFailed` if something broke). Writes to the pipe happen on a small sender thread, so a slow
reader never stalls this loop (and with it the timestamps); while one batch still waits for it, no other is
built, so a face that falls behind gets fewer, larger batches instead of a queue that grows.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import pickle
import queue
import signal
import sys
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from tui.cpu_slice import request_short_slice
from tui.engine.load.arrival_counts import ArrivalCollector, LevelArrivals
from tui.engine.load.backoff import Outcome
from tui.engine.load.health import IDLE_PROBE_S, CpuMeter, LoopLagMonitor
from tui.engine.load.lane_budget import in_budget, lane_budget
from tui.engine.load.runner import LoadRunner
from tui.engine.records import RequestRecord
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.hold import next_due_ns
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.stream.transport import make_client, stream_transport
from tui.engine.traces import TraceRequest
from tui.engine.wire import (
    ApplyShare,
    Batch,
    Goodbye,
    Health,
    LaneDelta,
    Stop,
    WorkerFailed,
    WorkerMessage,
    WorkerSpec,
)

if TYPE_CHECKING:
    from tui.engine.recording.plain_json import Encoder

BATCH_CLEAR_NS = 2_000_000
"""A batch is not built (and pickled, on this loop) when a held request is due within this: it goes out
after that send, not across it."""
GC_YOUNG_THRESHOLD = 10_000
"""Net allocations between two young collections in a worker (Python's default is 700; see `Worker.run`)."""


@dataclass
class _Lane:
    record: RequestRecord
    acc: StreamAccumulator
    arrivals: LevelArrivals
    announced: bool = False
    reported_tokens: int = 0
    reported_chunks: int = 0
    last_chunk_ns: int | None = None
    """The stamp of the last chunk already counted in the arrivals (None before the first)."""


class Worker:
    """State of one worker process (constructed inside its event loop)."""

    def __init__(self, spec: WorkerSpec, cmd: Connection, out: Connection) -> None:
        self.spec = spec
        self.index = index = spec.index
        self.workers = workers = spec.workers
        self.options = options = spec.options
        self.cmd = cmd
        self.out = out
        self.seq = 0
        self.lanes: dict[int, _Lane] = {}
        self.finished: list[RequestRecord] = []
        self.finished_lanes: list[LaneDelta] = []
        self.tokens = 0
        self.arrivals = ArrivalCollector()
        self.notices: list[str] = []
        self.level_id = 0
        self.level_at_ns = 0
        self.stop_cmd: tuple[bool, float] | None = None
        self.stop_event = asyncio.Event()
        self.runner = LoadRunner(
            self.issue,
            stagger_step_s=options.user_stagger_s,
            stagger_max_s=options.user_stagger_max_s,
            worker=index,
            workers=workers,
            trace=spec.workload.trace,
            notice=self.notices.append,
            warm=self.warm,
        )
        self.lag = LoopLagMonitor()
        self.cpu = CpuMeter()
        self.health_window_at = time.perf_counter()
        self.idle_lag_ms: float | None = None
        """The idle lag p99 measured at start, until the first window reading carries it."""
        self.outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.session: RequestSession | None = None
        self.session_enc: Encoder | None = None
        """Set when the run records a session: each batch goes out with its session form, encoded here so
        the face need not (`tui.engine.recording.batch_line`)."""
        if options.record is not None:
            from tui.engine.recording.batch_line import batch_encoder

            self.session_enc = batch_encoder(options.record_text)

    # --- requests -----------------------------------------------------------------------------

    async def warm(self, count: int) -> int:
        """Open ``count`` connections for the requests to come (`RequestSession.warm`)."""
        return await self.session.warm(count) if self.session is not None else 0

    async def issue(
        self,
        level_id: int,
        scheduled_ns: int | None,
        user: int | None = None,
        trace: TraceRequest | None = None,
    ) -> Outcome:
        """Run one request under ``level_id`` for closed-loop ``user`` (None: an open-loop arrival; ``trace``:
        a replay's entry) and queue its record (also when cancelled)."""
        assert self.session is not None
        seq = self.seq
        self.seq += 1
        rid = seq * self.workers + self.index + 1
        record = RequestRecord(
            request_id=rid,
            worker=self.index,
            seq=seq,
            level_id=level_id,
            sent_ns=time.perf_counter_ns(),
            scheduled_ns=scheduled_ns,
        )
        acc = StreamAccumulator()
        lane = self.lanes[rid] = _Lane(record, acc, self.arrivals.level(level_id))
        try:
            await run_request(self.session, record, acc, user=user, trace=trace)
        finally:
            # run_request has filled the record even when cancelled
            del self.lanes[rid]
            delta = self._lane_delta(lane, final=True)
            if delta is not None:
                self.finished_lanes.append(delta)
            self.finished.append(record)
        return Outcome(record.error_class, acc.retry_after_s)

    def _lane_delta(self, lane: _Lane, *, final: bool = False) -> LaneDelta | None:
        acc = lane.acc
        text = "".join(acc.pending_text) if acc.pending_text else ""
        if acc.pending_text:
            acc.pending_text.clear()
        reasoning = "".join(acc.pending_reasoning) if acc.pending_reasoning else ""
        if acc.pending_reasoning:
            acc.pending_reasoning.clear()
        tokens = acc.tokens
        self.tokens += tokens - lane.reported_tokens
        if lane.announced and not text and not reasoning and tokens == lane.reported_tokens:
            return None
        lane.announced = True
        lane.reported_tokens = tokens
        rec = lane.record
        n = len(acc.chunk_ns)
        first = acc.chunk_ns[0] if n else None
        stamps = b""
        counts: bytes | None = None
        done = lane.reported_chunks
        if n > done:
            # only the new stamps, as raw bytes (slicing the array beats a memoryview at these sizes)
            stamps = acc.chunk_ns[done:n].tobytes()
            if acc.tokens_known:
                counts = acc.chunk_tokens[done:n].tobytes()
            lane.arrivals.note(rec.sent_ns, lane.last_chunk_ns, stamps, counts)
            lane.last_chunk_ns = acc.chunk_ns[n - 1]
            if final:
                stamps = b""  # the record carries them all
                counts = b"" if acc.tokens_known else None
        elif acc.tokens_known:
            counts = b""
        lane.reported_chunks = n
        return LaneDelta(
            rec.request_id, rec.level_id, rec.sent_ns, text, tokens, first, stamps, counts, reasoning
        )

    # --- batches ------------------------------------------------------------------------------

    def batch(self) -> Batch:
        """Everything measured since the last batch."""
        lanes = self.finished_lanes
        self.finished_lanes = []
        live = list(self.lanes.values())  # in request-id order (issue order)
        if self.runner.awaiting_server and any(lane.record.first_byte_ns is not None for lane in live):
            self.runner.answered()  # a probe of the gone server got its first answer byte
        full = in_budget(
            (lane.record.level_id for lane in live), lane_budget(self.options.max_lanes, self.workers)
        )
        for lane, send in zip(live, full, strict=True):
            if not send:  # its tokens still count now; its text and stamps wait until it is in the budget
                self.tokens += lane.acc.tokens - lane.reported_tokens
                lane.reported_tokens = lane.acc.tokens
                continue
            delta = self._lane_delta(lane)
            if delta is not None:
                lanes.append(delta)
        records, self.finished = self.finished, []
        notices = self.notices[:]  # emptied in place: the session holds `self.notices.append`
        self.notices.clear()
        tokens, self.tokens = self.tokens, 0
        t_ns = time.perf_counter_ns()
        health = Health(self.lag.p99_ms(), self.cpu.share())
        window: Health | None = None
        now = time.perf_counter()
        if now - self.health_window_at >= self.options.health_window_s:
            self.health_window_at = now
            lag_p99, lag_mean = self.lag.take_window_ms()
            window = Health(
                lag_p99,
                self.cpu.take_window_share(),
                len(asyncio.all_tasks()),
                self.idle_lag_ms,
                lag_mean,
                self.runner.in_flight_meter.take_window_mean(),
            )
            self.idle_lag_ms = None  # sent once
        batch = Batch(
            worker=self.index,
            t_ns=t_ns,
            level_id=self.level_id,
            level_at_ns=self.level_at_ns,
            in_flight=self.runner.in_flight,
            lanes=lanes,
            tokens=tokens,
            records=records,
            health=health,
            notices=notices,
            health_window=window,
            dropped=self.runner.take_dropped(),
            arrivals=self.arrivals.take(),
        )
        return batch if self.session_enc is None else self.session_form(batch)

    def session_form(self, batch: Batch) -> Batch:
        """``batch`` with its session form (`Batch.session`)."""
        from tui.engine.recording.batch_line import session_piece

        assert self.session_enc is not None
        return batch._replace(session=session_piece(self.session_enc, batch))

    def send(self, msg: WorkerMessage) -> None:
        """Queue a message for the sender thread."""
        self.outbox.put(pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL))

    def _sender(self) -> None:
        while True:
            data = self.outbox.get()
            if data is None:
                return
            try:
                self.out.send_bytes(data)
            except OSError:
                return  # the handle is gone

    async def _batches(self) -> None:
        interval = self.options.batch_interval_s
        while True:
            await asyncio.sleep(interval)
            if self.options.test_block_loop_ms > 0 and self.options.test_block_loop_idle:
                time.sleep(self.options.test_block_loop_ms / 1e3)
            elif self.options.test_block_loop_ms > 0:
                end = time.perf_counter() + self.options.test_block_loop_ms / 1e3
                while time.perf_counter() < end:
                    pass
            await _clear_of_held_sends()
            if not self.outbox.empty():
                # The handle has not read the last batch yet (the face is behind and the pipe is full): keep
                # what was measured for the next one rather than queue batch after batch, so a slow face
                # costs this process one batch of memory, not one per interval. Nothing is lost: records,
                # lane text and tokens wait in place, and the batch that goes out carries them all.
                continue
            self.send(self.batch())

    # --- commands -----------------------------------------------------------------------------

    def _on_command(self) -> None:
        try:
            while self.cmd.poll():
                msg = self.cmd.recv()
                if isinstance(msg, ApplyShare):
                    share = msg.share
                    now_ns = time.perf_counter_ns()
                    ramp_s = self.runner.apply(share)
                    if share.level_id != self.level_id:
                        # the level's load is all there once its last staggered user has started
                        self.level_at_ns = now_ns + int(ramp_s * 1e9)
                    self.level_id = share.level_id
                elif isinstance(msg, Stop):
                    self.stop_cmd = (msg.finish_in_flight, msg.timeout_s)
                    self.stop_event.set()
        except (EOFError, OSError):
            # the handle went away: stop at once
            self.stop_cmd = (False, 0.0)
            self.stop_event.set()
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self.cmd.fileno())

    # --- main ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve commands and generate load until told to stop; then flush and say goodbye."""
        loop = asyncio.get_running_loop()
        sender = threading.Thread(target=self._sender, name="tokentop-sender", daemon=True)
        sender.start()
        spec = self.spec
        # The httpx client (over aiohttp: its import and TLS contexts are most of a worker's start-up) only
        # where httpx carries the streams; on the protocol path no request of a worker uses it.
        carrier = stream_transport(spec.target, self.options.transport)
        client = make_client(spec.target, self.options.transport) if carrier.name != "protocol" else None
        self.session = RequestSession(
            client, spec.target, spec.workload, spec.model, worker=self.index, workers=self.workers,
            notice=self.notices.append, transport=self.options.transport, trace_key=self.options.trace_key,
        )  # fmt: skip
        # Everything alive now (modules, the client) lives for the whole run: move it out of the collector's
        # sight, so the cyclic GC's pauses (each one stamps the chunks arriving meanwhile late) stay short.
        # The young generations only: a full pass first cost each worker's start ~15 ms and freed nothing.
        gc.collect(1)
        gc.freeze()
        # And collect rarely: a finished request leaves no cyclic garbage (client._unlink), but with the
        # default threshold (700 net allocations) open-loop arrivals set off a young collection every few
        # tenths of a second, 1-6 ms each, plus 6-8 ms older ones every ~6 s (traced at 200 paced streams;
        # loop lag p99 per 2 s window up to 4 ms). At 10,000 the same run saw one 9 ms pass in 30 s and lag
        # p99 0.4-1.4 ms. Rare cycles (an error's traceback) are still collected, a little later.
        gc.set_threshold(GC_YOUNG_THRESHOLD, 50, 50)
        lag_task = asyncio.ensure_future(self.lag.run())
        await asyncio.sleep(IDLE_PROBE_S)  # no load yet: the machine's own lag, the threshold's base
        self.idle_lag_ms = self.lag.take_window_p99_ms()
        self.health_window_at = time.perf_counter()
        self.runner.in_flight_meter.take_window_mean()  # the first window starts with it, after the probe
        self.cpu = CpuMeter()  # start measuring after set-up, which is not load-generation work
        batch_task = asyncio.ensure_future(self._batches())
        loop.add_reader(self.cmd.fileno(), self._on_command)
        self._on_command()
        try:
            await self.stop_event.wait()
            finish_in_flight, timeout_s = self.stop_cmd or (False, 0.0)
            with contextlib.suppress(Exception):
                loop.remove_reader(self.cmd.fileno())
            # batches keep flowing meanwhile
            await self.runner.stop(finish_in_flight=finish_in_flight, timeout_s=timeout_s)
        except Exception as exc:
            self.send(WorkerFailed(_one_line(exc)))
            raise
        finally:
            for task in (lag_task, batch_task):
                task.cancel()
            await asyncio.gather(lag_task, batch_task, return_exceptions=True)
            self.send(self.batch())
            self.send(Goodbye())
            self.outbox.put(None)
            with contextlib.suppress(Exception):
                await self.session.aclose()
                if client is not None:
                    await client.aclose()
            await loop.run_in_executor(None, sender.join, 5.0)


def leave_signals_to_the_face() -> None:
    """Ignore the signals that reach the whole process group: Ctrl-C, a closed terminal's hang-up, and a
    SIGTERM sent to the group (`timeout 60 tokentop bench ...`, a service manager). The face decides how
    to stop, not us: it asks, and our last records reach it; dying here would lose them. A worker that
    does not stop when asked is killed (SIGKILL)."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def worker_main(spec: WorkerSpec, cmd: Connection, out: Connection) -> None:
    """Process entry point (multiprocessing ``spawn``)."""
    leave_signals_to_the_face()
    # The face may be a full-screen app on this terminal: nothing of ours may print there. A failure goes
    # to the handle over the pipe instead (TOKENTOP_WORKER_STDERR=1 keeps stderr, for debugging).
    if not os.environ.get("TOKENTOP_WORKER_STDERR"):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)

    async def main() -> None:
        await Worker(spec, cmd, out).run()

    try:
        _run_loop(main())
    except BaseException as exc:
        with contextlib.suppress(Exception):
            out.send_bytes(pickle.dumps(WorkerFailed(_one_line(exc))))
        raise
    finally:
        with contextlib.suppress(Exception):
            out.close()


async def _clear_of_held_sends() -> None:
    """Wait until no held request is due within `BATCH_CLEAR_NS` (a few sends at most)."""
    for _ in range(4):
        due = next_due_ns()
        if due is None or due - time.perf_counter_ns() >= BATCH_CLEAR_NS:
            return
        await asyncio.sleep(max(0, due - time.perf_counter_ns()) / 1e9 + 0.0002)


def worker_fd_main(cmd_fd: int, out_fd: int, dead_after_s: float = 0.0) -> None:
    """Entry of a worker started by a node agent as a plain child (no multiprocessing, no Ray): commands on
    ``cmd_fd``, the first being the pickled `WorkerSpec`, messages out on ``out_fd``. With ``dead_after_s``
    the commands pass a dead-man switch (`tui.engine.load.deadman`) so the worker stops by itself when the
    agent goes quiet; then `worker_main`, unchanged."""
    import multiprocessing

    from tui.engine.load.deadman import start_relay

    cmd = Connection(cmd_fd, writable=False)
    out = Connection(out_fd, readable=False)
    spec: WorkerSpec = pickle.loads(cmd.recv_bytes())
    if dead_after_s > 0:
        inner_r, inner_w = multiprocessing.Pipe(duplex=False)
        start_relay(cmd, inner_w, dead_after_s)
        cmd = inner_r
    worker_main(spec, cmd, out)


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return (text.splitlines() or [type(exc).__name__])[0][:300]


def _run_loop(coro: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when it is installed, else asyncio's own loop (``TOKENTOP_LOOP=asyncio`` forces that).

    Measured on the 2-core machine (tests/perf/transport_cost.py, 200 paced streams): the engine's CPU per
    chunk falls from about 48 to 26 us (a bare Protocol's from 20 to 6: most of it is the selector loop).
    Through the whole engine at 200 streams x 50 tok/s (calibrate's level), client-added ITL error p99 over
    alternating runs: 2.7-7.2 ms on the stdlib loop, 1.5-3.9 ms on uvloop.

    Every engine process that stamps times (the workers, the canary) runs here, with a short CPU slice:
    a read or a held send waits less behind other processes (`tui.cpu_slice`).
    """
    request_short_slice()
    if os.environ.get("TOKENTOP_LOOP", "").strip().lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            if sys.version_info >= (3, 11):
                with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                    runner.run(coro)
                return
            uvloop.install()  # pragma: no cover - Python 3.10 only
    asyncio.run(coro)
