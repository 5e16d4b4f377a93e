"""A short CPU slice for the processes that take timestamps: the engine's workers and the simulator.

On a machine shared with other work (the app's own face, another test run, a build), a process that wakes
for a read waits in the run queue until the running one's slice ends (about 1-3 ms), and every stamp it
takes then waits too: a worker's chunk and send stamps, the simulator's arrival and token stamps (the
referee that tokentop's figures are checked against). Linux's EEVDF scheduler (6.12 and later) lets a
process ask for a shorter slice with ``sched_setattr``; that needs no privilege, gives it no larger share of
the CPU, and lets it preempt the running task when it wakes. Measured with `tests/perf/trace_arrivals.py
--busy` (the manual's traces page). Older kernels take the call and ignore it; other systems skip it.
``TOKENTOP_CPU_SLICE=0`` leaves the kernel's default, to measure what it buys.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

SLICE_NS = 100_000
"""The slice asked for: the shortest Linux grants (0.1 ms; it clamps a request to 0.1-100 ms)."""

_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}
"""``sched_setattr`` and ``sched_getattr`` by machine (arm64 has the generic table)."""

_ATTR = struct.Struct("IIQiIQQQII")
"""``struct sched_attr``, version 1 (56 bytes): size, policy, flags, nice, priority, runtime, deadline,
period, util min, util max. For SCHED_OTHER the runtime field is the requested slice."""


def _syscalls() -> tuple[int, int] | None:
    if not sys.platform.startswith("linux"):
        return None
    return _SYSCALLS.get(platform.machine())


def request_short_slice(slice_ns: int = SLICE_NS) -> bool:
    """Ask for a ``slice_ns`` slice for the calling thread and the threads it starts after, keeping its
    policy (SCHED_OTHER) and nice value; False where the system has no such call, refused it, or
    ``TOKENTOP_CPU_SLICE=0`` says not to."""
    calls = _syscalls()
    if calls is None or os.environ.get("TOKENTOP_CPU_SLICE") == "0":
        return False
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    attr = ctypes.create_string_buffer(
        _ATTR.pack(_ATTR.size, 0, 0, nice, 0, slice_ns, 0, 0, 0, 0), _ATTR.size
    )
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.syscall(calls[0], 0, attr, 0) == 0)


def slice_ns(pid: int) -> int | None:
    """The slice ``pid`` (its main thread; 0: the calling thread) runs with: the kernel's base slice unless
    it asked for another (Linux 6.12 and later; 0 before); None where it cannot be read."""
    calls = _syscalls()
    if calls is None:
        return None
    attr = ctypes.create_string_buffer(_ATTR.size)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(calls[1], pid, attr, _ATTR.size, 0) != 0:
        return None
    return int(_ATTR.unpack(attr.raw)[5])
