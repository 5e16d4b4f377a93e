"""The command layer: every subcommand's flags, the readers that turn them into a face's typed config
(`tui.configs`), and `main`, which dispatches. Only `tui.__main__` (and the ``tokentop`` script) import it;
no face does (a contract in ``pyproject.toml``)."""

from tui.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
