"""The UI-free core stays UI-free: importing every engine and sim module loads no textual, rich or plotext."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys

import pytest

import tui.engine
import tui.sim

UI_PACKAGES = ("textual", "rich", "plotext")
OPTIONAL_EXTRAS = ("ray", "pynvml")
"""Libraries of optional extras: a module that needs one is skipped where it is not installed (CI installs
the Ray extra in its own step before these tests, so there the Ray pool's imports are checked too)."""


def _modules() -> list[str]:
    names = []
    for pkg in (tui.engine, tui.sim):
        names.append(pkg.__name__)
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, prefix=f"{pkg.__name__}.")]
    return sorted(names)


def test_engine_and_sim_import_no_ui_libraries() -> None:
    modules = _modules()
    assert "tui.engine.host.handle" in modules and "tui.engine.load.worker" in modules
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as exc:\n"
        f"        if exc.name not in {OPTIONAL_EXTRAS!r}:\n"
        "            raise\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {UI_PACKAGES!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []


def test_bench_face_imports_no_ui_libraries() -> None:
    code = (
        "import json, sys, tui.bench.run, tui.cli\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {UI_PACKAGES!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no extra thread on one core")
@pytest.mark.parametrize("preset", [None, "2"])
def test_tokentops_processes_load_numpy_without_a_blas_thread_per_core(preset: str | None) -> None:
    """`tokentop` leaves the cores to the server under test: numpy loads in its face and workers with no
    BLAS threads (each one spins at start), unless the user asked for them."""
    code = (
        "import contextlib, io, os\n"
        "from tui.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['help'])\n"
        "import numpy\n"
        "threads = int(next(l for l in open('/proc/self/status') if l.startswith('Threads:')).split()[1])\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'], threads)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                         check=True)  # fmt: skip
    value, threads = out.stdout.split()
    assert value == (preset or "1")
    assert int(threads) == int(value), out.stdout  # the main thread and the BLAS threads asked for
