"""Checks a reviewer kept making by hand: a string statement that documents nothing (an orphaned docstring,
usually one that lost its attribute in an edit), code that cites the tracker or its own history instead of
saying why it is as it is, and a path or module name in the code, the manual or pyproject (the develop
page's module map too) that points to nothing since a move."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HISTORY = re.compile(r"\b(issues? ?#?\d+|session \d+|round \d+)\b", re.IGNORECASE)
"""A tracker issue or a work session named in the code."""
PAST = re.compile(r"\bused to\b(?! (test|check|build|make|run|start|send|read|draw|time|size))")
"""How the code once behaved ("used to count on"), not what a thing is used to do."""


def _sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def orphaned_docstrings(source: str) -> list[int]:
    """Lines of string statements that are neither a docstring (first in a module, class or function) nor
    an attribute docstring (right after an assignment)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                continue
            if not isinstance(stmt.value.value, str):
                continue
            documents_owner = i == 0 and isinstance(
                node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            )
            documents_attribute = i > 0 and isinstance(body[i - 1], ast.Assign | ast.AnnAssign)
            if not (documents_owner or documents_attribute):
                lines.append(stmt.lineno)
    return lines


def test_the_check_finds_an_orphaned_docstring() -> None:
    source = 'X = 1\n"""about X"""\n"""about nothing"""\n\ndef f():\n    """f"""\n    y = 2\n    "y"\n'
    assert orphaned_docstrings(source) == [3]


def test_no_orphaned_docstrings() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _sources("tui", "tests")
        for line in orphaned_docstrings(path.read_text(encoding="utf-8"))
    ]
    assert not found, "string statements that document nothing: " + ", ".join(found)


def test_no_tracker_or_history_references() -> None:
    found = []
    for path in _sources("tui", "tests"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HISTORY.search(line) or (path.is_relative_to(ROOT / "tui") and PAST.search(line)):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "say why the code is so, not which issue or session made it:\n" + "\n".join(found)


POINTER_PATH = re.compile(r"(?<![\w./-])tui/[\w/.-]*\w")
"""A path into the package: ``tui/engine/host/handle.py``, ``tui/manual/``."""
POINTER_NAME = re.compile(r"(?<![\w./-])tui(?:\.\w+)+")
"""A dotted name: a module, or a module and what it defines (``tui.engine.api.Engine``)."""
WHEEL_ONLY = {"tui/_themes": "where the wheel puts the themes (pyproject's force-include)"}
"""Paths that exist only in a built wheel."""


def _defined(body: list[ast.stmt]) -> set[str]:
    """The names a module or class body binds (conditional and guarded bindings included)."""
    names: set[str] = set()
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
        elif isinstance(stmt, ast.If | ast.Try):
            names |= _defined(stmt.body) | _defined(stmt.orelse)
            names |= {n for h in getattr(stmt, "handlers", []) for n in _defined(h.body)}
    return names


@functools.cache
def _module_body(source: Path) -> list[ast.stmt]:
    """A module's statements, parsed once for all the names quoted from it."""
    return ast.parse(source.read_text(encoding="utf-8")).body


def name_exists(root: Path, dotted: str) -> bool:
    """A module or package under ``root``, then names its module (and a class in it) defines."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:i])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if source.is_file():
            break
    else:
        return False
    body = _module_body(source)
    for name in parts[i:]:
        if name.startswith("__") and name.endswith("__"):
            return True  # a module's own attribute (__file__, __version__)
        if name not in _defined(body):
            return False
        classes = [s for s in body if isinstance(s, ast.ClassDef) and s.name == name]
        if not classes:
            return True  # a function or value: what it holds is not checked
        body = classes[0].body
    return True


def stale_pointers(root: Path, text: str) -> list[str]:
    """The paths and dotted names ``text`` quotes that do not exist under ``root``."""
    found = [p.rstrip(".") for p in POINTER_PATH.findall(text)]
    missing = [p for p in found if p not in WHEEL_ONLY and not (root / p).exists()]
    return missing + [n for n in POINTER_NAME.findall(text) if not name_exists(root, n)]


def test_the_pointer_check_finds_a_stale_path_and_name() -> None:
    text = (
        "see tui/engine/api.py and tui/engine/worker.py; `tui.engine.api.Engine.snapshot`, `tui.gone`, "
        + ("`tui.engine.api.NoSuchName`, tui/_themes.")
    )
    assert stale_pointers(ROOT, text) == ["tui/engine/worker.py", "tui.gone", "tui.engine.api.NoSuchName"]


def _pointer_sources() -> list[Path]:
    return [*_sources("tui"), *sorted((ROOT / "tui" / "manual").glob("*.md")), ROOT / "pyproject.toml"]


def test_every_quoted_module_path_and_name_exists() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {pointer}"
        for path in _pointer_sources()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for pointer in stale_pointers(ROOT, line)
    ]
    assert not found, "pointers to nothing (moved or renamed?):\n" + "\n".join(found)


MAP_HEAD = re.compile(r"(?P<top>(?:tui|themes|tests)/\S*)|  (?P<engine>\w+/|\w+\.py)")
"""What opens a line of the module map: a path from the top, or a folder or module of ``tui/engine``."""
MAP_WORD = re.compile(r"(?<![\w/.-])\w+(?:\.py|/)(?![\w/])")
"""A module or folder named in the map, in the folder its line opened (or the line above, for a
continuation)."""


def module_map_misses(root: Path, page: str) -> list[str]:
    """What the develop page's module map (its first code block) names that does not exist, and the
    package folders of ``tui`` and ``tui/engine`` it leaves out."""
    folder, named, missing = root, set(), []
    for line in page.split("```", 2)[1].splitlines()[1:]:
        rest = line
        head = MAP_HEAD.match(line)
        if head is not None:
            opened = root / head["top"] if head["top"] else root / "tui" / "engine" / head["engine"]
            named.add(opened)
            if not opened.exists():
                missing.append(str(opened.relative_to(root)))
            folder = opened if head[0].endswith("/") else opened.parent
            rest = line[head.end() :]
        missing += [
            str((folder / w).relative_to(root)) for w in MAP_WORD.findall(rest) if not (folder / w).exists()
        ]
    for package in (root / "tui", root / "tui" / "engine"):
        for sub in sorted(p for p in package.iterdir() if (p / "__init__.py").is_file()):
            if sub not in named:
                missing.append(f"{sub.relative_to(root)}/ is not in the map")
    return missing


def test_the_develop_pages_module_map_names_what_exists() -> None:
    page = (ROOT / "tui" / "manual" / "develop.md").read_text(encoding="utf-8")
    assert module_map_misses(ROOT, page) == []
