"""Nothing under ``tui/`` imports the entry point: faces take their options from `tui.options`.

`tui.cli` imports every face (lazily, per subcommand); a face importing it back closes a circle that only
works because of the lazy imports. The sources are parsed, so imports inside functions count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tui

ROOT = Path(tui.__file__).parent
ALLOWED = {Path("__main__.py")}
"""``python -m tui`` is the entry point's own launcher: the one module that may import it."""


def _imported_modules(tree: ast.AST, module: str) -> set[str]:
    """Every module an ``import``/``from ... import`` names, anywhere in ``tree`` (relative ones resolved
    against ``module``), plus ``pkg.name`` for each ``from pkg import name``."""
    found: set[str] = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _module_name(path: Path) -> str:
    """``tui/app/run.py`` -> ``tui.app.run``; a package's ``__init__`` keeps its name, so relative imports
    in it resolve against the package itself."""
    return ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)


def test_no_module_under_tui_imports_tui_cli() -> None:
    offenders = []
    sources = sorted(ROOT.rglob("*.py"))
    assert len(sources) > 30  # the walk found the package
    for path in sources:
        if path.relative_to(ROOT) in ALLOWED:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        if "tui.cli" in _imported_modules(tree, _module_name(path)):
            offenders.append(str(path.relative_to(ROOT.parent)))
    assert offenders == []


def test_the_check_sees_imports_inside_functions_and_relative_ones() -> None:
    code = "def f():\n    from tui.cli import build_parser\n"
    assert "tui.cli" in _imported_modules(ast.parse(code), "tui.app.run")
    assert "tui.cli" in _imported_modules(ast.parse("from .. import cli\n"), "tui.app.run")
    assert "tui.cli" in _imported_modules(ast.parse("from . import cli\n"), "tui.bench")
    assert "tui.cli" in _imported_modules(ast.parse("import tui.cli as c\n"), "tui.bench")
    assert "tui.cli" not in _imported_modules(ast.parse("from tui import options\n"), "tui.bench")
