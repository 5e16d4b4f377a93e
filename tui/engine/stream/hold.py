"""A request built ahead of its time (a trace replay's) held to its moment on the worker's event loop."""

from __future__ import annotations

import asyncio
import time

SPIN_NS = 500_000
"""`wait_until_ns` sleeps until this close to the moment, then yields in a tight loop: a timer alone wakes
0.3 ms late at p50 (uvloop, measured), the spin makes it microseconds for about 6% of a core at 200 req/s.
Kept under contention too: the replay test's scenario, spin and no spin in alternate runs, 10 runs each
(tests/perf/trace_arrivals.py; 2 cores, other work at load 6-14), arrival vs schedule by the simulator's
log: with the spin p50 0.21 ms, p99 190 ms; without 0.54 ms, 94 ms; one core also kept busy, with the
spin p50 0.25 ms, p99 15 ms, max 35 ms; without 0.55 ms, 15 ms, 30 ms. The tail is the run queue's either
way (a pass's p99 ranged 1-300 ms with it, 2-590 ms without); the spin buys the median."""


_holding: list[int] = []
"""The moments of the requests holding on this process's loop now (`next_due_ns`)."""


async def wait_until_ns(t_ns: int) -> None:
    """Return at ``perf_counter_ns() >= t_ns``, to within a few microseconds on an idle loop."""
    _holding.append(t_ns)
    try:
        wait_ns = t_ns - time.perf_counter_ns()
        if wait_ns > SPIN_NS:
            await asyncio.sleep((wait_ns - SPIN_NS) / 1e9)
        while time.perf_counter_ns() < t_ns:
            await asyncio.sleep(0)
    finally:
        _holding.remove(t_ns)


def next_due_ns() -> int | None:
    """The earliest moment a held request is due, or None: work on the loop that can wait (a batch for the
    face) waits until it is sent rather than run across it."""
    return min(_holding) if _holding else None
