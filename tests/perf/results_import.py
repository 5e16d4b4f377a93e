"""What the results model costs to import, against a schema library's, and what `tokentop plot` costs to
start: the reason the model is stdlib dataclasses.

    python tests/perf/results_import.py [--times 7]

Each figure is the smallest of ``--times`` fresh interpreters (``python -X importtime``, cumulative µs of
the named module; a wall clock for whole commands), so a busy machine's noise mostly drops out.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PYDANTIC_MODEL = """
import pydantic
class Stats(pydantic.BaseModel):
    mean: float | None; median: float | None; std: float | None; p50: float | None; p90: float | None
    p95: float | None; p99: float | None; min: float | None = None; max: float | None = None
class Level(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    level_id: int; mode: str; duration: float | None; completed: int; failed: int
    ttft: Stats; tpot: Stats; itl: Stats; e2el: Stats
class Results(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    tool: str; version: str; levels: tuple[Level, ...]
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def import_us(code: str, module: str, times: int) -> int:
    """Cumulative import time of ``module`` while running ``code``, in µs (the best of ``times``)."""
    best = None
    for _ in range(times):
        r = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                           env=_env(), check=True)  # fmt: skip
        for line in r.stderr.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3 and parts[2] == module:
                us = int(parts[1])
                best = us if best is None else min(best, us)
    assert best is not None, module
    return best


def wall_ms(args: list[str], times: int) -> float:
    best = float("inf")
    for _ in range(times):
        t = time.perf_counter()
        subprocess.run([sys.executable, *args], capture_output=True, env=_env(), check=True)
        best = min(best, (time.perf_counter() - t) * 1e3)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--times", type=int, default=7)
    n = ap.parse_args().times
    model = import_us("import tui.engine.results.files", "tui.engine.results.files", n)
    print(f"results model + writer/reader (dataclasses): {model / 1e3:7.1f} ms")
    try:
        pyd = import_us(PYDANTIC_MODEL, "pydantic", n)
        print(f"pydantic alone (before any model is defined): {pyd / 1e3:7.1f} ms")
    except subprocess.CalledProcessError:
        print("pydantic: not installed")
    command = import_us("import tui.cli.results, tui.engine.results.plot", "tui.engine.results.plot", n)
    print(f"tokentop plot's imports (model and SVG):       {command / 1e3:7.1f} ms")
    from tests.unit.results_data import frozen_results
    from tui.engine.results.files import write_results

    with tempfile.TemporaryDirectory() as tmp:
        saved = write_results(frozen_results(), Path(tmp) / "run.json")
        print(f"tokentop --help (wall):                     {wall_ms(['-m', 'tui', '--help'], n):7.1f} ms")
        plot = ["-m", "tui", "plot", str(saved), "--out", str(Path(tmp) / "run.svg")]
        print(f"tokentop plot RESULTS (wall):               {wall_ms(plot, n):7.1f} ms")


if __name__ == "__main__":
    main()
