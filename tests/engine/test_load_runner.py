"""LoadRunner alone, with a fake request: reconciliation semantics, exactly and fast."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from tui.engine.load import LoadRunner, WorkerShare

pytestmark = pytest.mark.timeout(20)


class FakeRequests:
    """Requests that last until the test releases them (or ``auto_s``)."""

    def __init__(self, auto_s: float | None = None, error: str | None = None) -> None:
        self.auto_s = auto_s
        self.error = error
        self.started: list[tuple[int, int | None]] = []
        self.running = 0
        self.release = asyncio.Event()
        self.changed = asyncio.Event()

    async def __call__(self, level_id: int, scheduled_ns: int | None) -> str | None:
        self.started.append((level_id, scheduled_ns))
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
    runner.apply(WorkerShare(level_id=3, concurrency=1))
    assert fake.running == 5  # nothing cancelled
    fake.release.set()
    fake.release = asyncio.Event()  # the next requests wait again
    await fake.until(lambda: fake.running == 1 and runner.in_flight == 1)
    await asyncio.sleep(0.05)  # (bounded) give surplus users a chance to misbehave
    assert fake.running == 1 and fake.started[-1][0] == 3
    await runner.stop(drain=False, timeout_s=1.0)
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
    await runner.stop(drain=False, timeout_s=1.0)


async def test_pause_and_drain_stop() -> None:
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
    await runner.stop(drain=True, timeout_s=2.0)
    assert time.monotonic() - t0 < 0.5 and fake.running == 0


async def test_connect_failures_back_off_instead_of_spinning() -> None:
    fake = FakeRequests(auto_s=0.0, error="connect")
    runner = LoadRunner(fake)
    runner.apply(WorkerShare(level_id=1, concurrency=4))
    await asyncio.sleep(0.5)  # the scenario's length (bounded)
    await runner.stop(drain=False, timeout_s=1.0)
    # 4 users backing off 50, 100, 200, 400 ms: about 4 x 4 attempts, not thousands
    assert 8 <= len(fake.started) <= 32


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
    gaps = [b - a for a, b in itertools.pairwise(sched)]  # type: ignore[operator]
    assert all(g == 5_000_000 for g in gaps)  # 1/200 s, on the absolute timeline
    await runner.stop(drain=False, timeout_s=1.0)
