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
import struct
import sys
from typing import Literal

SLICE_NS = 100_000
"""The slice asked for: the shortest Linux grants (0.1 ms; it clamps a request to 0.1-100 ms)."""

_SYSCALLS = {"x86_64": {"set": 314, "get": 315}, "aarch64": {"set": 274, "get": 275}}
"""``sched_setattr`` and ``sched_getattr`` by machine (arm64 has the generic table)."""

_ATTR = struct.Struct("IIQiIQQQII")
"""``struct sched_attr``, version 1 (56 bytes): size, policy, flags, nice, priority, runtime, deadline,
period, util min, util max. For SCHED_OTHER the runtime field is the requested slice."""


def _sched_call(which: Literal["set", "get"], *args: object) -> bool | None:
    """``sched_setattr`` or ``sched_getattr`` with ``args``: whether it succeeded, None where this
    system has no such call."""
    calls = _SYSCALLS.get(os.uname().machine) if sys.platform.startswith("linux") else None
    if calls is None:
        return None
    return bool(ctypes.CDLL(None).syscall(calls[which], *args) == 0)


def request_short_slice(slice_ns: int = SLICE_NS) -> bool:
    """Ask for a ``slice_ns`` slice for the calling thread and the threads it starts after, keeping its
    policy (SCHED_OTHER) and nice value; False where the system has no such call, refused it, or
    ``TOKENTOP_CPU_SLICE=0`` says not to."""
    if os.environ.get("TOKENTOP_CPU_SLICE") == "0":
        return False
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    attr = ctypes.create_string_buffer(
        _ATTR.pack(_ATTR.size, 0, 0, nice, 0, slice_ns, 0, 0, 0, 0), _ATTR.size
    )
    return bool(_sched_call("set", 0, attr, 0))


def slice_ns(pid: int) -> int | None:
    """The slice ``pid`` (its main thread; 0: the calling thread) runs with: the kernel's base slice unless
    it asked for another (Linux 6.12 and later; 0 before); None where it cannot be read."""
    attr = ctypes.create_string_buffer(_ATTR.size)
    if not _sched_call("get", pid, attr, _ATTR.size, 0):
        return None
    return int(_ATTR.unpack(attr.raw)[5])
