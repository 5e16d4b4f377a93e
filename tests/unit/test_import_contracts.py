"""The folders say which code runs in which process, and the imports keep it so.

The contracts themselves, each with the reason it exists, are in pyproject.toml (``[tool.importlinter]``);
this test runs them and adds the one rule import-linter cannot state for a whole package: no import circle
anywhere under ``tui`` (type-only and function-level imports included, as grimp sees them).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports() -> str:
    beside = Path(sys.executable).with_name("lint-imports")
    exe = str(beside) if beside.exists() else shutil.which("lint-imports")
    assert exe, "lint-imports (import-linter, a test dependency) is not installed"
    out = subprocess.run(
        [exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_every_import_contract_is_kept() -> None:
    report = _lint_imports()
    assert "BROKEN" not in report and " kept, 0 broken" in report, report


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_under_tui() -> None:
    graph = grimp.build_graph("tui", cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    assert cycles(edges) == []
