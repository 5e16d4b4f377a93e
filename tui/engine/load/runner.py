"""Load control inside one engine worker: closed-loop users and open-loop arrivals, reconciled to a target.

The handle splits the user's `LoadTarget` over the workers (`tui.engine.load.split`); each worker's
`LoadRunner` reconciles toward its `WorkerShare` (`tui.engine.wire`, as it crosses to the worker process):

- closed loop: N users, each sending its next request as soon as its last one ends. Raising N starts the new
  users a few ms apart (``stagger_step_s`` each, the whole step spread over at most ``stagger_max_s``, users
  of W workers interleaved): a jump to 200 users is then not a 200-connection storm, and identical requests
  do not keep starting and ending in the same instant for the rest of the run. Lowering N lets the surplus
  users finish their request in flight and stop (nothing is cancelled).
- trace replay: arrivals at a trace's own timestamps (worker i of W takes every W-th request), each one
  at ``anchor + (t - position) / speed`` on the timeline the handle anchored for every worker alike, so a
  change of speed goes on from where the replay is (`tui.engine.load.trace_pacing`).
- open loop: arrivals at rate R (Poisson or constant), scheduled on an absolute timeline (each send time is
  the previous *scheduled* time plus an interval, so a late wake-up does not slow the rate down), optionally
  capped at ``max_concurrency`` in flight (arrivals beyond it wait; their scheduling lag is recorded).

Neither becomes a hot loop against a failing server (`tui.engine.load.backoff`). Each closed-loop user backs
off on its own; while the server is gone (refused, reset) one user of the worker probes it, at most one
request a second, and the others wait. A success, or a probe's first answer byte (`answered`), wakes them
all, so a restarted server gets its full load back at once. The open loop holds its arrivals and drops the
ones due in a hold (`ArrivalGate`; counted in `dropped`).

Every request is tagged with the level id of the share it started under.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from tui.engine.load.backoff import SERVER_GONE, ArrivalGate, Backoff, Outcome
from tui.engine.load.health import InFlightMeter
from tui.engine.load.trace_pacing import TracePacer, WarmFn
from tui.engine.wire import WorkerShare

if TYPE_CHECKING:
    from tui.engine.config import TraceConfig
    from tui.engine.traces.protocol import TraceRequest


PROBER_CHECK_S = 1.0
"""How often a user waiting for a gone server checks that someone still probes it."""


class IssueFn(Protocol):
    """Runs one request to completion: (level id, scheduled ns or None, closed-loop user index or None, and
    a replay's trace entry, passed only in a replay) -> its `Outcome` (a bare error class, or None if it
    succeeded, stands for an outcome without a Retry-After). Must not raise except on cancel."""

    def __call__(
        self, level_id: int, scheduled_ns: int | None, user: int | None = ..., trace: TraceRequest = ..., /
    ) -> Awaitable[Outcome | str | None]: ...


class LoadRunner:
    """Reconciles one worker's in-flight requests toward its `WorkerShare`.

    ``worker``/``workers`` place this worker's new users on the shared stagger grid: user k of worker i
    starts at (k x workers + i) steps, so W workers together start one user per step."""

    def __init__(
        self,
        issue: IssueFn,
        *,
        stagger_step_s: float = 0.0,
        stagger_max_s: float = 1.0,
        worker: int = 0,
        workers: int = 1,
        trace: TraceConfig | None = None,
        notice: Callable[[str], None] | None = None,
        warm: WarmFn | None = None,
    ) -> None:
        """``trace``: the trace a ``trace`` share replays; ``notice``: where a replay's lines go (a bad line,
        falling behind its schedule, its end); ``warm``: opens connections before a replay's first send."""
        self._issue = issue
        self._warm = warm
        self.stagger_step_s = stagger_step_s
        self.stagger_max_s = stagger_max_s
        self.worker = worker
        self.workers = max(1, workers)
        self.share: WorkerShare | None = None
        self._users: dict[int, asyncio.Task[None]] = {}
        self._open: set[asyncio.Task[None]] = set()
        self._arrivals: asyncio.Task[None] | None = None
        self._slot_freed = asyncio.Event()
        self._stopping = False
        self.in_flight = 0
        self.in_flight_meter = InFlightMeter()
        """``in_flight`` averaged over each health window (the worker takes it)."""
        self._served = asyncio.Event()
        """Set (and replaced) when a request succeeds: wakes the users backing off after the server left."""
        self._awaiting_server = 0
        """Users waiting on `_served` now (a success with none waiting swaps no event)."""
        self._prober: int | None = None
        """The one user that tries the gone server while the others wait; None: nobody is probing."""
        self._gate = ArrivalGate(random.Random(f"gate:{worker}"))
        self._pacer = (
            TracePacer(trace, worker=worker, workers=self.workers, notice=notice)
            if trace is not None
            else None
        )

    @property
    def awaiting_server(self) -> bool:
        """Some user is waiting for the gone server to answer again."""
        return self._awaiting_server > 0

    def answered(self) -> None:
        """A request of this worker got an answer byte: the server is back, wake the waiting users (a
        probe's whole answer may take long; its first byte says enough)."""
        if self._awaiting_server:
            self._prober = None
            served, self._served = self._served, asyncio.Event()
            served.set()

    def take_dropped(self) -> int:
        """Open-loop arrivals dropped in a back-off hold since the last call."""
        dropped, self._gate.dropped = self._gate.dropped, 0
        return dropped

    # --- control ------------------------------------------------------------------------------

    def apply(self, share: WorkerShare) -> float:
        """Reconcile toward ``share`` (call from the worker's loop). Returns how long, in seconds, the new
        closed-loop users take to have all started (0 when none is added or there is no stagger)."""
        if self._stopping:
            return 0.0
        old, self.share = self.share, share
        active = not share.paused
        ramp_s = 0.0
        if share.mode == "concurrency" and active:
            new = [i for i in range(share.concurrency) if (t := self._users.get(i)) is None or t.done()]
            step_s = self._stagger_step(len(new))
            for rank, idx in enumerate(new):
                delay_s = (rank * self.workers + self.worker) * step_s
                ramp_s = max(ramp_s, delay_s)
                self._users[idx] = asyncio.ensure_future(self._user(idx, delay_s))
        # users above the target (or all, in open loop / paused) see it on their next turn and stop
        arrivals_changed = old is None or (
            old.level_id,
            old.mode,
            old.rate,
            old.arrival,
            old.max_concurrency,
            old.paused,
            old.speed,
            old.trace_anchor_ns,
            old.trace_pos_ns,
            old.trace_epoch,
        ) != (
            share.level_id,
            share.mode,
            share.rate,
            share.arrival,
            share.max_concurrency,
            share.paused,
            share.speed,
            share.trace_anchor_ns,
            share.trace_pos_ns,
            share.trace_epoch,
        )
        if arrivals_changed:
            if self._arrivals is not None:
                self._arrivals.cancel()
                self._arrivals = None
            if share.mode == "rate" and active and share.rate > 0:
                self._arrivals = asyncio.ensure_future(self._arrive(share))
            elif share.mode == "trace" and active and share.trace_anchor_ns is not None and self._pacer:
                self._arrivals = asyncio.ensure_future(self._pacer.run(share, self._send_traced, self._warm))
        self._slot_freed.set()
        return ramp_s

    def _stagger_step(self, new_here: int) -> float:
        """Seconds between consecutive new users over all workers: the configured step, shrunk so that the
        whole step (about ``new_here x workers`` users) starts within ``stagger_max_s``."""
        if self.stagger_step_s <= 0 or new_here == 0:
            return 0.0
        users = new_here * self.workers
        return min(self.stagger_step_s, self.stagger_max_s / users)

    async def stop(self, *, finish_in_flight: bool, timeout_s: float) -> None:
        """Stop issuing; let in-flight requests finish (``finish_in_flight``, up to ``timeout_s``) or cancel
        them."""
        self._stopping = True
        if self._arrivals is not None:
            self._arrivals.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._arrivals
        tasks = [t for t in self._users.values() if not t.done()] + [t for t in self._open if not t.done()]
        if finish_in_flight and tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- closed loop --------------------------------------------------------------------------

    def _wants_user(self, idx: int) -> bool:
        s = self.share
        return (
            not self._stopping
            and s is not None
            and not s.paused
            and s.mode == "concurrency"
            and idx < s.concurrency
        )

    async def _user(self, idx: int, delay_s: float = 0.0) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        backoff = Backoff(random.Random(f"{self.worker}:{idx}"))
        try:
            while self._wants_user(idx):
                assert self.share is not None
                outcome = _outcome(await self._run(self.share.level_id, None, idx))
                wait_s = backoff.delay_s(outcome)
                if wait_s > 0 and outcome.retry_after_s is None and outcome.error_class in SERVER_GONE:
                    await self._back_off_until_served(wait_s, idx)
                else:
                    # Finishing one request and starting the next is ~1 ms of Python; yielding in
                    # between (sleep(0) after a success) has chunks of other streams that came meanwhile
                    # stamped first.
                    await asyncio.sleep(wait_s)
        finally:
            if self._prober == idx:
                self._prober = None

    async def _back_off_until_served(self, wait_s: float, idx: int) -> None:
        """Wait until the server is back. One user, the prober, tries again after ``wait_s`` (its own
        back-off, capped at a second); the others wait for the server's answer, taking the prober's part if
        it stops. Woken users come back on the start-up stagger grid: a restarted server meets no storm."""
        self._awaiting_server += 1
        try:
            while True:
                probing = self._prober is None or self._prober == idx
                if probing:
                    self._prober = idx
                try:
                    await asyncio.wait_for(self._served.wait(), wait_s if probing else PROBER_CHECK_S)
                    break
                except asyncio.TimeoutError:
                    if probing:
                        return  # this user probes now
                    if not self._wants_user(idx):
                        return
                    prober = self._users.get(self._prober) if self._prober is not None else None
                    if prober is None or prober.done() or not self._wants_user(self._prober or 0):
                        self._prober = None
        finally:
            self._awaiting_server -= 1
        users = self.share.concurrency if self.share is not None else 1
        await asyncio.sleep((idx * self.workers + self.worker) * self._stagger_step(users))

    async def _run(
        self,
        level_id: int,
        scheduled_ns: int | None,
        user: int | None = None,
        entry: TraceRequest | None = None,
    ) -> Outcome | str | None:
        self.in_flight += 1
        self.in_flight_meter.set(self.in_flight)
        try:
            if entry is None:
                outcome = await self._issue(level_id, scheduled_ns, user)
            else:
                outcome = await self._issue(level_id, scheduled_ns, user, entry)
        finally:
            self.in_flight -= 1
            self.in_flight_meter.set(self.in_flight)
            self._slot_freed.set()
        if _outcome(outcome).error_class is None:
            self.answered()
        return outcome

    # --- open loop ----------------------------------------------------------------------------

    async def _arrive(self, share: WorkerShare) -> None:
        rng = random.Random(f"{share.seed}:{share.level_id}")
        interval_s = 1.0 / share.rate
        now = time.perf_counter_ns()
        next_ns = now + int(share.phase_s % interval_s * 1e9) if share.arrival == "constant" else now
        first = True
        while True:
            if share.arrival == "poisson":
                next_ns += int(rng.expovariate(share.rate) * 1e9)
            elif not first:
                next_ns += int(interval_s * 1e9)
            first = False
            delay_ns = next_ns - time.perf_counter_ns()
            if delay_ns > 0:
                await asyncio.sleep(delay_ns / 1e9)
            cap = share.max_concurrency
            while cap is not None and self._open_in_flight() >= cap:
                self._slot_freed.clear()
                await self._slot_freed.wait()
            if not self._gate.admit(time.perf_counter_ns()):
                continue
            task = asyncio.ensure_future(self._run_open(share.level_id, next_ns))
            self._open.add(task)
            task.add_done_callback(self._open.discard)

    async def _send_traced(self, share: WorkerShare, scheduled_ns: int, entry: TraceRequest) -> None:
        """A replay's request is due: in flight at once (after the cap and the gate, as any arrival)."""
        cap = share.max_concurrency
        while cap is not None and self._open_in_flight() >= cap:
            self._slot_freed.clear()
            await self._slot_freed.wait()
        if not self._gate.admit(time.perf_counter_ns()):
            return
        task = asyncio.ensure_future(self._run_open(share.level_id, scheduled_ns, entry))
        self._open.add(task)
        task.add_done_callback(self._open.discard)

    async def _run_open(self, level_id: int, scheduled_ns: int, entry: TraceRequest | None = None) -> None:
        sent_ns = time.perf_counter_ns()
        outcome = _outcome(await self._run(level_id, scheduled_ns, None, entry))
        self._gate.see(outcome, sent_ns, time.perf_counter_ns())

    def _open_in_flight(self) -> int:
        return sum(1 for t in self._open if not t.done())


def _outcome(result: Outcome | str | None) -> Outcome:
    """What an `IssueFn` returned, as an `Outcome` (a bare error class, or None, has no Retry-After)."""
    return result if isinstance(result, Outcome) else Outcome(result)
