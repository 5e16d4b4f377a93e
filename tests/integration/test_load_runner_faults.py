"""LoadRunner against a fake server that goes away, rate limits or fails fast: the closed loop comes back at
once when the server does, the open loop never sends more than its schedule and drops what it held back."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from tui.engine.load.backoff import CONNECT_CAP_S, Outcome
from tui.engine.load.runner import LoadRunner
from tui.engine.wire import WorkerShare

pytestmark = pytest.mark.timeout(20)


class FlakyServer:
    """A fake request whose outcome is whatever the test says the server does now; every start is stamped
    (``perf_counter``, with its user)."""

    def __init__(self, outcome: Outcome, duration_s: float = 0.001) -> None:
        self.outcome = outcome
        self.duration_s = duration_s
        self.starts: list[tuple[float, int | None, Outcome]] = []
        self.ended = asyncio.Event()
        self.failing_user: int | None = None
        """This user's requests get 5xx whatever ``outcome`` says."""

    async def __call__(
        self, level_id: int, scheduled_ns: int | None, user: int | None = None, trace: object = None
    ) -> Outcome:
        outcome = self.outcome  # what the server is doing when the request arrives
        if user is not None and user == self.failing_user:
            outcome = Outcome("http_5xx")
        self.starts.append((time.perf_counter(), user, outcome))
        await asyncio.sleep(self.duration_s)
        self.ended.set()
        return outcome

    def started_between(self, t0: float, t1: float) -> int:
        return sum(1 for t, _, _ in self.starts if t0 <= t < t1)


async def _until(pred, timeout_s: float) -> float:  # type: ignore[no-untyped-def]
    """Poll ``pred`` every 5 ms (bounded); the seconds it took."""
    t0 = time.perf_counter()
    while not pred():
        assert time.perf_counter() - t0 < timeout_s, "timed out"
        await asyncio.sleep(0.005)
    return time.perf_counter() - t0


async def test_users_backing_off_a_gone_server_all_resume_as_soon_as_one_finds_it_back() -> None:
    server = FlakyServer(Outcome("connect"))
    runner = LoadRunner(server)
    users = 6
    runner.apply(WorkerShare(level_id=1, concurrency=users))
    await asyncio.sleep(2.0)  # down long enough for every user to reach the connect cap
    down = len(server.starts)
    # each user: 25-50, 50-100, ... ms, then at most one attempt per half cap; without back-off: thousands
    assert down <= users * (6 + 2.0 / (CONNECT_CAP_S / 2)), down
    server.outcome = Outcome(None)
    back = time.perf_counter()
    served_users: set[int | None] = set()

    def all_served() -> bool:
        served_users.update(u for t, u, o in server.starts if t >= back and o.error_class is None)
        return len(served_users) == users

    waited_s = await _until(all_served, 3.0)
    first = min(t for t, _, o in server.starts if o.error_class is None)
    last = max(min(t for t, u, o in server.starts if u == k and o.error_class is None) for k in range(users))
    await runner.stop(finish_in_flight=False, timeout_s=1.0)
    assert waited_s <= CONNECT_CAP_S + 0.2  # the first retry finds it within the cap...
    assert last - first < 0.1, last - first  # ...and wakes the rest at once (unwoken: up to a cap apart)


async def test_a_5xx_back_off_is_not_cut_short_by_other_users_successes() -> None:
    """Only a server that was *gone* wakes the users: one failing a user's requests while the others succeed
    keeps that user backing off."""
    server = FlakyServer(Outcome(None))
    server.failing_user = 0
    runner = LoadRunner(server)
    runner.apply(WorkerShare(level_id=1, concurrency=3))
    await asyncio.sleep(2.0)
    await runner.stop(finish_in_flight=False, timeout_s=1.0)
    failing = sum(1 for _, u, o in server.starts if u == 0)
    served = sum(1 for _, u, o in server.starts if u != 0)
    assert served > 500, served  # the other two never stopped (1 ms requests)
    # user 0: 0, 25-50, 50-100, ... 800-1600 ms: about 7 in 2 s; woken by each success it would be ~1000
    assert failing <= 10, failing


async def test_open_loop_holds_for_retry_after_and_drops_what_was_due_meanwhile() -> None:
    server = FlakyServer(Outcome("http_429", retry_after_s=0.5))
    runner = LoadRunner(server)
    rate, run_s = 200.0, 1.2
    runner.apply(WorkerShare(level_id=1, mode="rate", rate=rate, arrival="constant"))
    await asyncio.sleep(run_s)
    await runner.stop(finish_in_flight=False, timeout_s=1.0)
    sent, dropped = len(server.starts), runner.take_dropped()
    # one request, then one per Retry-After (0.5-0.55 s): 3 or so sent; without the hold: 240
    assert sent <= 5, sent
    assert sent + dropped == pytest.approx(rate * run_s, abs=15)  # the schedule ran on: nothing sent late
    assert runner.take_dropped() == 0  # taken once


async def test_open_loop_late_arrivals_meeting_fast_failures_are_not_a_burst() -> None:
    """Arrivals queued behind a cap (the server was slow) used to flush the moment it started failing fast:
    each failure freed a slot for the next late arrival, a hot loop of failures."""
    server = FlakyServer(Outcome("http_5xx"), duration_s=0.5)
    runner = LoadRunner(server)
    runner.apply(WorkerShare(level_id=1, mode="rate", rate=100.0, arrival="constant", max_concurrency=2))
    await _until(lambda: len(server.starts) == 2, 2.0)
    server.duration_s = 0.0  # from now on it fails at once; 48 arrivals fall due behind the cap meanwhile
    await server.ended.wait()
    fast = time.perf_counter()
    await asyncio.sleep(0.5)
    await runner.stop(finish_in_flight=False, timeout_s=1.0)
    burst = server.started_between(fast, fast + 0.5)
    # the schedule alone would send 50 in these 0.5 s; backing off from the 2nd failure: a handful
    assert burst <= 10, burst
    assert runner.take_dropped() >= 40


async def test_woken_users_come_back_on_the_stagger_grid_not_all_at_once() -> None:
    """200 users woken together would be the connection storm the start-up stagger exists to avoid."""
    server = FlakyServer(Outcome("connect"))
    step_s, users = 0.05, 4
    runner = LoadRunner(server, stagger_step_s=step_s, stagger_max_s=1.0)
    runner.apply(WorkerShare(level_id=1, concurrency=users))
    await asyncio.sleep(2.0)  # every user at the connect cap
    server.outcome = Outcome(None)
    back = time.perf_counter()

    def first_ok(k: int) -> float | None:
        return min(
            (t for t, u, o in server.starts if u == k and t >= back and o.error_class is None), default=None
        )

    await _until(lambda: all(first_ok(k) is not None for k in range(users)), 3.0)
    await runner.stop(finish_in_flight=False, timeout_s=1.0)
    times = sorted(t for k in range(users) if (t := first_ok(k)) is not None)
    gaps = sorted(b - a for a, b in itertools.pairwise(times))
    # the first finds the server; the rest wake on its success and start one step apart (user 0 at once,
    # beside the finder: the one gap allowed to be short), all within the grid's span
    assert gaps[1] >= step_s * 0.8, gaps
    assert times[-1] - times[0] <= users * step_s + 0.1, times


async def test_while_the_server_is_gone_one_user_probes_it_about_once_a_second() -> None:
    """Twenty users each retrying a refused port at the connect cap would be 40 attempts a second; one
    probe for the worker is enough to find the server back."""
    server = FlakyServer(Outcome("connect"))
    users = 20
    runner = LoadRunner(server)
    runner.apply(WorkerShare(level_id=1, concurrency=users))
    await asyncio.sleep(2.0)  # past every user's first steps: the hold's steady state
    t0 = time.perf_counter()
    await asyncio.sleep(3.0)
    steady = server.started_between(t0, time.perf_counter())
    server.outcome = Outcome(None)
    back = time.perf_counter()
    await _until(
        lambda: len({u for t, u, o in server.starts if t >= back and o.error_class is None}) == users, 3.0
    )
    await runner.stop(finish_in_flight=False, timeout_s=1.0)
    # one prober at 0.5-1 s steps: 3-6 in 3 s; each user on its own: ~120
    assert steady <= 8, steady


async def test_a_probe_answering_wakes_the_waiting_users_before_it_ends() -> None:
    """A real request can take a minute: the others come back on the probe's first byte (`answered`)."""
    server = FlakyServer(Outcome("connect"))
    runner = LoadRunner(server)
    runner.apply(WorkerShare(level_id=1, concurrency=4))
    await _until(lambda: runner.awaiting_server and len(server.starts) >= 6, 3.0)
    server.outcome, server.duration_s = Outcome(None), 30.0  # back, with long answers
    await _until(lambda: any(o.error_class is None for _, _, o in server.starts), 3.0)
    runner.answered()  # the worker saw the probe's first byte
    waited_s = await _until(lambda: runner.in_flight == 4, 2.0)
    await runner.stop(finish_in_flight=False, timeout_s=1.0)
    assert waited_s < 1.0, waited_s
