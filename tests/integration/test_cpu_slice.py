"""The processes that take timestamps run with a short CPU slice (`tui.cpu_slice`): the simulator, the
referee, and the engine's workers. Checked by reading each process's scheduling attributes from outside."""

from __future__ import annotations

import threading
from pathlib import Path

import psutil
import pytest

from tests.support.engine_helpers import running_handle, wait_for
from tui.cpu_slice import SLICE_NS, request_short_slice, slice_ns
from tui.engine.config import LoadTarget
from tui.sim.launch import SimServer


def _kernel_grants_short_slices() -> bool:
    """Whether this kernel honours a requested slice (EEVDF, Linux 6.12+): asked for in a throwaway thread."""
    granted: list[int | None] = []

    def ask() -> None:
        granted.append(slice_ns(0) if request_short_slice() else None)

    thread = threading.Thread(target=ask)
    thread.start()
    thread.join(5)
    return granted == [SLICE_NS]


pytestmark = pytest.mark.skipif(
    not _kernel_grants_short_slices(), reason="this kernel takes no requested slice (Linux 6.12+ does)"
)


def test_the_simulator_runs_with_a_short_slice_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    with SimServer("small-gpu") as server:
        assert server.process is not None
        assert slice_ns(server.process.pid) == SLICE_NS
    monkeypatch.setenv("TOKENTOP_CPU_SLICE", "0")  # the way to measure what it buys
    with SimServer("small-gpu") as server:
        assert server.process is not None
        assert slice_ns(server.process.pid) not in (None, SLICE_NS)


def test_engine_workers_run_with_a_short_slice(tmp_path: Path) -> None:
    with (
        SimServer("small-gpu", time_scale=20) as sim,
        running_handle(sim.url, LoadTarget(concurrency=2), tmp_path, workers=2) as handle,
    ):
        wait_for(handle, lambda s: s.completed >= 2, 30, "two requests")
        workers = [p for p in psutil.Process().children() if "spawn_main" in " ".join(p.cmdline())]
        assert len(workers) == 2, [p.cmdline() for p in workers]
        assert [slice_ns(p.pid) for p in workers] == [SLICE_NS, SLICE_NS]
