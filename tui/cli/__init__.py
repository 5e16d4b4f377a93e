"""The command layer: every subcommand's flags, the readers that turn them into a face's typed config
(`tui.configs`), and `main`, which dispatches. Only `tui.__main__` (and the ``tokentop`` script) import it;
no face does (a contract in ``pyproject.toml``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """`tui.cli.dispatch.main`, loaded when called: ``spawn`` runs the ``tokentop`` script again in every
    engine worker, whose ``from tui.cli import main`` would otherwise load the whole command layer there too.
    (The module is not ``tui.cli.main``: importing it would replace this function on the package.)"""
    from tui.cli.dispatch import main as run  # lazy: see above

    return run(argv)


def build_parser() -> argparse.ArgumentParser:
    """`tui.cli.dispatch.build_parser`, loaded when called (as `main`)."""
    from tui.cli.dispatch import build_parser as build  # lazy: see `main`

    return build()


__all__ = ["build_parser", "main"]
