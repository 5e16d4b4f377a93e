"""The folders say which code runs in which process, and the imports keep it so.

The contracts, each with the reason it exists, are in pyproject.toml under ``[tool.importlinter]`` (the format
of import-linter, whose ``forbidden`` and ``independence`` types are read here). They are checked on grimp's
import graph (type-only and function-level imports included) rather than with import-linter itself: that
tool depends on click, and with click installed ``import httpx`` loads httpx's command line and with it rich,
into every engine worker. This test adds two rules import-linter cannot state for a whole package: no
import circle anywhere under ``tui``, and no two folders of ``tui/engine`` importing each other.
"""

from __future__ import annotations

import ast
import copy
import sys
from itertools import permutations
from pathlib import Path
from typing import Any

import grimp
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
CONFIG: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        *CONFIG["root_packages"],
        include_external_packages=CONFIG["include_external_packages"],
        cache_dir=None,
    )


def _without_ignored(graph: grimp.ImportGraph, contract: dict[str, Any]) -> grimp.ImportGraph:
    """A copy without the contract's listed exceptions; an exception that matches no import fails (stale)."""
    graph = copy.deepcopy(graph)
    for line in contract.get("ignore_imports", []):
        importer, imported = (part.strip() for part in line.split("->"))
        assert graph.direct_import_exists(importer=importer, imported=imported), (
            f"{contract['name']}: ignore_imports lists {line!r}, which no longer exists: remove it"
        )
        graph.remove_import(importer=importer, imported=imported)
    return graph


def broken(graph: grimp.ImportGraph, contract: dict[str, Any]) -> list[str]:
    """The chains that break one contract, each as 'a -> b -> c'."""
    graph = _without_ignored(graph, contract)
    if contract["type"] == "forbidden":
        pairs = [(s, f) for s in contract["source_modules"] for f in contract["forbidden_modules"]]
    elif contract["type"] == "independence":
        pairs = list(permutations(contract["modules"], 2))
    else:
        raise AssertionError(f"{contract['name']}: contract type {contract['type']!r} is not checked here")
    out = []
    for importer, imported in pairs:
        for module in sorted(m for m in graph.modules if m == importer or m.startswith(importer + ".")):
            chain = graph.find_shortest_chain(importer=module, imported=imported, as_packages=True)
            if chain:
                out.append(" -> ".join(chain))
                break
    return out


@pytest.mark.parametrize("contract", CONFIG["contracts"], ids=[c["name"] for c in CONFIG["contracts"]])
def test_import_contract_is_kept(graph: grimp.ImportGraph, contract: dict[str, Any]) -> None:
    assert broken(graph, contract) == [], contract["name"]


def test_a_broken_contract_is_caught(graph: grimp.ImportGraph) -> None:
    """The checker itself can fail: the app does import textual, and the demo sim is started by a face."""
    contract = {
        "name": "t",
        "type": "forbidden",
        "source_modules": ["tui.app"],
        "forbidden_modules": ["textual"],
    }
    assert broken(graph, contract)
    stale = dict(contract, ignore_imports=["tui.sim.perf_model -> tui.app"])
    with pytest.raises(AssertionError, match="no longer exists"):
        broken(graph, stale)


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


def test_no_import_circles_under_tui(graph: grimp.ImportGraph) -> None:
    ours = {m for m in graph.modules if m == "tui" or m.startswith("tui.")}
    edges = {m: graph.find_modules_directly_imported_by(m) & ours for m in ours}
    assert cycles(edges) == []


def folder_imports(root: Path, package: str) -> dict[str, set[str]]:
    """Which folders of ``package`` (its files at ``root``) each of its folders imports, by every import
    statement (type-only and function-level ones too). Modules at the package's top are no folder: in the
    engine they are the shared contracts, which have a contract of their own."""
    folders = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    depth = len(package.split("."))
    edges: dict[str, set[str]] = {f: set() for f in folders}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).parts
        if len(parts) < 2:
            continue
        here = [*package.split("."), *parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                names = [f"{module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                rest = name.split(".")[depth:]
                if name.startswith(package + ".") and rest[0] in folders and rest[0] != parts[0]:
                    edges[parts[0]].add(rest[0])
    return edges


def mutual_pairs(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a in edges for b in edges[a] if a < b and a in edges[b])


def test_the_folder_check_finds_two_folders_importing_each_other(tmp_path: Path) -> None:
    """Absolute, relative, function-level and package imports all count; the package's top is no folder."""
    for name, source in {
        "top.py": "from pkg.a import x\n",
        "a/__init__.py": "",
        "a/x.py": "from pkg.b.y import f\nfrom pkg import top\n",
        "b/__init__.py": "",
        "b/y.py": "def f():\n    from ..a import x\n",
        "c/__init__.py": "",
        "c/z.py": "import pkg.a.x\nfrom pkg import b\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    edges = folder_imports(tmp_path, "pkg")
    assert edges == {"a": {"b"}, "b": {"a"}, "c": {"a", "b"}}
    assert mutual_pairs(edges) == [("a", "b")]


def test_no_two_engine_folders_import_each_other() -> None:
    """Two folders that import each other are one room with two doors: neither can be read, tested or moved
    alone. Every arrow between two folders of the engine runs one way."""
    edges = folder_imports(ROOT / "tui" / "engine", "tui.engine")
    assert {"host", "aggregate", "recording"} <= edges.keys()
    assert mutual_pairs(edges) == []
