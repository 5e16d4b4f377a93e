"""Checks a reviewer kept making by hand: a string statement that documents nothing (an orphaned docstring,
usually one that lost its attribute in an edit), and code that cites the tracker or its own history
instead of saying why it is as it is."""

from __future__ import annotations

import ast
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
