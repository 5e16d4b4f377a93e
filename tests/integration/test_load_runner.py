"""LoadRunner alone, with a fake request: reconciliation semantics, exactly and fast."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from tui.engine.load.runner import LoadRunner
from tui.engine.wire import WorkerShare

pytestmark = pytest.mark.timeout(20)


class FakeRequests:
    """Requests that last until the test releases them (or ``auto_s``)."""

    def __init__(self, auto_s: float | None = None, error: str | None = None) -> None:
        self.auto_s = auto_s
        self.error = error
        self.started: list[tuple[int, int | None]] = []
        self.users: list[int | None] = []
        self.running = 0
        self.release = asyncio.Event()
        self.changed = asyncio.Event()

    async def __call__(
        self, level_id: int, scheduled_ns: int | None, user: int | None = None, trace: object = None
    ) -> str | None:
        self.started.append((level_id, scheduled_ns))
        self.users.append(user)
        self.running += 1
        self.changed.set()
        try:
            if self.auto_s is not None:
                await asyncio.sleep(self.auto_s)
            else:
                await self.release.wait()
        finally:
            self.running -= 1
            self.changed.set()
        return self.error

    async def until(self, pred, timeout_s: float = 2.0) -> None:  # type: ignore[no-untyped-def]
        async def wait() -> None:
            while not pred():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(wait(), timeout_s)


async def test_raise_starts_users_at_once_and_lower_lets_requests_finish() -> None:
    fake = FakeRequests()
    runner = LoadRunner(fake)
    runner.apply(WorkerShare(level_id=1, concurrency=2))
    await fake.until(lambda: fake.running == 2)
    runner.apply(WorkerShare(level_id=2, concurrency=5))
    await fake.until(lambda: fake.running == 5)
    assert [lvl for lvl, _ in fake.started] == [1, 1, 2, 2, 2]
    assert fake.users == [0, 1, 2, 3, 4]  # each closed-loop request says which user sends it (multi-turn)
    runner.apply(WorkerShare(level_id=3, concurrency=1))
    assert fake.running == 5  # nothing cancelled
    fake.release.set()
    fake.release = asyncio.Event()  # the next requests wait again
    await fake.until(lambda: fake.running == 1 and runner.in_flight == 1)
    await asyncio.sleep(0.05)  # (bounded) give surplus users a chance to misbehave
    assert fake.running == 1 and fake.started[-1][0] == 3
    await runner.stop(finish_in_flight=False, timeout_s=1.0)
    assert fake.running == 0 and runner.in_flight == 0


async def test_lowering_then_raising_reuses_the_user_still_finishing() -> None:
    fake = FakeRequests()
    runner = LoadRunner(fake)
    runner.apply(WorkerShare(level_id=1, concurrency=3))
    await fake.until(lambda: fake.running == 3)
    runner.apply(WorkerShare(level_id=2, concurrency=1))
    runner.apply(WorkerShare(level_id=3, concurrency=3))
    await asyncio.sleep(0.02)
    assert fake.running == 3  # never more in flight than the target
    await runner.stop(finish_in_flight=False, timeout_s=1.0)


async def test_pause_and_stop_letting_in_flight_finish() -> None:
    fake = FakeRequests(auto_s=0.05)
    runner = LoadRunner(fake)
    runner.apply(WorkerShare(level_id=1, concurrency=2))
    await fake.until(lambda: len(fake.started) >= 4)
    runner.apply(WorkerShare(level_id=1, concurrency=2, paused=True))
    await fake.until(lambda: fake.running == 0)
    n = len(fake.started)
    await asyncio.sleep(0.1)
    assert len(fake.started) == n
    runner.apply(WorkerShare(level_id=2, concurrency=2))
    await fake.until(lambda: fake.running == 2)
    t0 = time.monotonic()
    await runner.stop(finish_in_flight=True, timeout_s=2.0)
    assert time.monotonic() - t0 < 0.5 and fake.running == 0


async def test_connect_failures_back_off_instead_of_spinning() -> None:
    fake = FakeRequests(auto_s=0.0, error="connect")
    runner = LoadRunner(fake)
    runner.apply(WorkerShare(level_id=1, concurrency=4))
    await asyncio.sleep(0.5)  # the scenario's length (bounded)
    await runner.stop(finish_in_flight=False, timeout_s=1.0)
    # each user's first attempt, then one prober backing off 50, 100, 200, 400 ms: about 4 + 4 attempts
    # (each user on its own: 4 x 4; no back-off: thousands)
    assert 5 <= len(fake.started) <= 12


async def test_open_loop_caps_in_flight_and_stamps_the_schedule() -> None:
    fake = FakeRequests()
    runner = LoadRunner(fake)
    runner.apply(WorkerShare(level_id=1, mode="rate", rate=200.0, arrival="constant", max_concurrency=3))
    await fake.until(lambda: fake.running == 3)
    await asyncio.sleep(0.05)
    assert fake.running == 3  # arrivals beyond the cap wait
    fake.release.set()
    await fake.until(lambda: len(fake.started) >= 10)
    sched = [s for _, s in fake.started]
    assert all(s is not None for s in sched)
    assert set(fake.users) == {None}  # an open-loop arrival has no user
    gaps = [b - a for a, b in itertools.pairwise(sched)]  # type: ignore[operator]
    assert all(g == 5_000_000 for g in gaps)  # 1/200 s, on the absolute timeline
    await runner.stop(finish_in_flight=False, timeout_s=1.0)


# timing: the first user's start is held to 15 ms (one stagger step is 20 ms); in CI's first pass, both cores
# never idle, a descheduled loop read 16.6 ms once: it runs with the tests timed to the millisecond
@pytest.mark.timing
async def test_new_users_start_staggered_within_the_cap_and_interleaved_across_workers() -> None:
    """Two runners stand for two workers sharing one stagger grid; each start is stamped."""
    fake = FakeRequests()
    starts: list[tuple[float, int]] = []

    def issue_for(worker: int):  # type: ignore[no-untyped-def]
        async def issue(level_id: int, scheduled_ns: int | None, user: int | None) -> str | None:
            starts.append((time.perf_counter(), worker))
            return await fake(level_id, scheduled_ns, user)

        return issue

    runners = [
        LoadRunner(issue_for(i), stagger_step_s=0.02, stagger_max_s=1.0, worker=i, workers=2) for i in (0, 1)
    ]
    t0 = time.perf_counter()
    ramps = [r.apply(WorkerShare(level_id=1, concurrency=5)) for r in runners]
    assert ramps == pytest.approx([0.16, 0.18])  # user k of worker i at (2k + i) x 20 ms
    await fake.until(lambda: fake.running == 10, timeout_s=3.0)
    assert [w for _, w in sorted(starts)] == [0, 1] * 5  # one grid: the workers take turns
    assert starts[0][0] - t0 < 0.015 and 0.17 <= max(t for t, _ in starts) - t0 < 0.5
    # a bigger step is squeezed into the cap: 100 new users within 0.25 s
    squeezed = LoadRunner(fake, stagger_step_s=0.02, stagger_max_s=0.25)
    assert squeezed.apply(WorkerShare(level_id=1, concurrency=100)) == pytest.approx(0.2475)
    # raising an existing level staggers only the users it adds
    assert runners[0].apply(WorkerShare(level_id=2, concurrency=6)) == pytest.approx(0.0)
    for r in [*runners, squeezed]:
        await r.stop(finish_in_flight=False, timeout_s=1.0)


async def test_no_stagger_starts_every_new_user_at_once() -> None:
    fake = FakeRequests()
    runner = LoadRunner(fake, stagger_step_s=0.0)
    assert runner.apply(WorkerShare(level_id=1, concurrency=50)) == 0.0
    await fake.until(lambda: fake.running == 50, timeout_s=1.0)
    await runner.stop(finish_in_flight=False, timeout_s=1.0)
