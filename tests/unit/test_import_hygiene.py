"""The UI-free core stays UI-free: importing every engine and sim module loads no textual, rich or plotext."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import tui.engine
import tui.sim

UI_PACKAGES = ("textual", "rich", "plotext")
OPTIONAL_EXTRAS = ("ray", "pynvml")
"""Libraries of optional extras: a module that needs one is skipped where it is not installed (CI installs
the Ray extra only in its own step, after these tests)."""


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
