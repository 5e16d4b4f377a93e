"""The CPU each of tokentop's own processes spends before it does useful work: what a user pays for every
command and every engine worker, and most of what CI's tests pay for their ~500 short processes.

    python tests/perf/startup_cost.py [--runs 8] [--before DIR]

Each figure is one child's user+sys CPU seconds (`resource.getrusage` of the children, read around it),
the mean, median and least of ``--runs`` runs, the kinds interleaved so a busy machine's spells fall on all:

- ``bench``: `python -m tui bench --url http://127.0.0.1:9 --requests 1` (refused: start, parse, probe, exit);
- ``worker``: one engine worker spawned as the face spawns it (`spawn_worker`), told to stop at once, joined
  (its imports, its 0.2 s idle lag probe, its goodbye); ``worker-script``: the same from a face started by
  the ``tokentop`` script, which ``spawn`` runs again in the child as ``__mp_main__``;
- ``sim``: `python -m tui.sim --port 0` as the tests start it (`SimServer`), stopped once `/v1/models`
  answers;
- ``help``: `tokentop --help`.

``--before DIR``: also each kind with ``DIR`` first on PYTHONPATH, alternately (e.g. `git archive main tui |
tar -x -C DIR`, then `python -m compileall -q DIR`: CI compiles, and compiling would be measured otherwise).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tui.sim.launch import SimServer  # noqa: E402

WORKER_DRIVER = """
def drive():  # imports inside: what a module's top imports, spawn imports again in the child
    import os, pickle, resource
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the face's `main` does before any numpy
    from tui.engine.config import EngineOptions, TargetConfig, WorkloadConfig
    from tui.engine.host.worker_pool import ensure_resource_tracker, spawn_worker
    from tui.engine.wire import Goodbye, Stop, WorkerSpec

    ensure_resource_tracker()  # a child of this driver until it exits: outside the reading below
    spec = WorkerSpec(0, 1, TargetConfig("http://127.0.0.1:9/v1"), WorkloadConfig(), "m", EngineOptions())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc, cmd, data = spawn_worker(spec)
    cmd.send(Stop(finish_in_flight=False, timeout_s=0.0))
    for _ in range(100):
        if not data.poll(30.0) or isinstance(pickle.loads(data.recv_bytes()), Goodbye):
            break
    proc.join(10.0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
"""

SCRIPT_HEAD = "import sys\nfrom tui.cli import main  # as the tokentop script: spawn runs this in the child\n"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def _pythonpath(path: str | None) -> Iterator[None]:
    """Children started meanwhile import tokentop from ``path`` (None: this checkout's)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (path, saved) if p)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def _child_cpu(args: list[str]) -> float:
    before = _cpu()
    subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=False)
    return _cpu() - before


def bench() -> float:
    return _child_cpu(
        [sys.executable, "-m", "tui", "bench", "--url", "http://127.0.0.1:9", "--requests", "1"]
    )


def help_() -> float:
    script = Path(sys.executable).with_name("tokentop")
    return _child_cpu([str(script), "--help"] if script.exists() else [sys.executable, "-m", "tui", "--help"])


def _worker(driver: list[str]) -> float:
    out = subprocess.run([sys.executable, *driver], capture_output=True, text=True, timeout=60, check=True)
    return float(out.stdout.split()[-1])


def sim() -> float:
    before = _cpu()
    SimServer().start().stop()
    return _cpu() - before


def _cell(variant: str, values: list[float]) -> str:
    return f"{variant} {statistics.fmean(values):.3f} / {statistics.median(values):.3f} / {min(values):.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--before", metavar="DIR", help="a tree with tokentop's tui/ to measure alongside")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # `python -m tui` finds tui/ in the working directory before PYTHONPATH
        script_py = Path(tmp, "worker_script.py")
        script_py.write_text(SCRIPT_HEAD + WORKER_DRIVER + "if __name__ == '__main__':\n    drive()\n")
        kinds: dict[str, Callable[[], float]] = {
            "bench": bench,
            "worker": lambda: _worker(["-c", WORKER_DRIVER + "drive()\n"]),
            "worker-script": lambda: _worker([str(script_py)]),
            "sim": sim,
            "help": help_,
        }
        variants = [("before", args.before), ("after", None)] if args.before else [("now", None)]
        figures: dict[tuple[str, str], list[float]] = {(k, v): [] for k in kinds for v, _ in variants}
        for _ in range(args.runs):
            for kind, measure in kinds.items():
                for variant, path in variants:
                    with _pythonpath(path):
                        figures[kind, variant].append(measure())
    print(f"CPU s per process (user+sys), {args.runs} runs each: mean / median / min")
    for kind in kinds:
        cells = [_cell(v, figures[kind, v]) for v, _ in variants]
        if args.before:  # run i of "after" beside run i of "before": the pairs' own noise mostly cancels
            pairs = zip(figures[kind, "after"], figures[kind, "before"], strict=True)
            cells.append(f"paired change, median {statistics.median(a - b for a, b in pairs):+.3f}")
        print(f"{kind:<14}" + "   ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
