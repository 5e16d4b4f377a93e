"""The parser and `main`: one table of the subcommands, each its flags (``add_args``), the reader that
turns them into the one config its face takes (``to_config``), and the face's ``run(config) -> int``.

Kept import-light: `tokentop --help` must answer fast, so each command module imports its face only in
its ``run``, and nothing here loads numpy before `main` has set ``OPENBLAS_NUM_THREADS``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from tui import __version__
from tui.cli import bench, calibrate, live, ray_check, results, sessions, sim, watch
from tui.cli import help as manual
from tui.configs import UsageError
from tui.engine.host.pool import PoolError


class Command(NamedTuple):
    """One subcommand: its line in the listing, its manual page, and the three steps of running it."""

    what: str
    page: str | None
    add_args: Callable[[argparse.ArgumentParser], None]
    to_config: Callable[[argparse.Namespace], Any]
    run: Callable[[Any], int]


COMMANDS: dict[str, Command] = {
    "live": Command("the live app (default)", "app", live.add_live_args, live.live_config, live.run),
    "bench": Command(
        "headless run over load levels; writes results JSON",
        "bench",
        bench.add_bench_args,
        bench.bench_config,
        bench.run,
    ),
    "sim": Command(
        "run the built-in simulated OpenAI-compatible server",
        "simulator",
        sim.add_sim_args,
        sim.sim_config,
        sim.run,
    ),
    "calibrate": Command(
        "find how many streams this machine can time accurately",
        "performance",
        calibrate.add_calibrate_args,
        calibrate.calibrate_config,
        calibrate.run,
    ),
    "watch": Command(
        "no load: only the server's own signals, from its /metrics",
        "watch",
        watch.add_watch_args,
        watch.watch_config,
        watch.run,
    ),
    "sessions": Command(
        "list the recorded sessions (newest last)",
        "sessions",
        sessions.add_sessions_args,
        sessions.sessions_config,
        sessions.run_sessions,
    ),
    "replay": Command(
        "the live app's panes over a recorded session, no server",
        "sessions",
        sessions.add_replay_args,
        sessions.replay_config,
        sessions.run_replay,
    ),
    "compare": Command(
        "compare sessions or results files, level by level",
        "sessions",
        sessions.add_compare_args,
        sessions.compare_config,
        sessions.run_compare,
    ),
    "plot": Command(
        "the SVG plot of a saved run", "exports", results.add_plot_args, results.plot_config, results.run_plot
    ),
    "export": Command(
        "a saved run for other tools: vLLM, CSV, llm-d, AIPerf, a Mooncake trace",
        "exports",
        results.add_export_args,
        results.export_config,
        results.run_export,
    ),
    "ray-check": Command(
        "a Ray cluster's nodes: versions, CPUs, clocks, the target reached",
        "ray",
        ray_check.add_ray_check_args,
        ray_check.ray_check_config,
        ray_check.run,
    ),
    "help": Command(
        "the manual: list its pages, or print one",
        None,
        manual.add_help_args,
        manual.help_config,
        manual.run,
    ),
}
"""Every subcommand, in the order `tokentop --help` lists them; with none given, ``live``."""


class _DefaultsShown(argparse.HelpFormatter):
    """Each flag's help ends with its default, taken from the action (so from the config it fills), unless
    the help already says it or there is none to say (no value, a switch, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help = action.help or ""
        default = action.default
        if "default" in help or default in (None, argparse.SUPPRESS) or isinstance(default, bool | list):
            return action.help
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        return f"{help} (default {shown.replace('%', '%%')})"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line (no usage dump) and exits 2, and shows defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _DefaultsShown)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        suffix = "" if message.endswith("?") else " (see --help)"
        self.exit(2, f"{self.prog}: error: {message}{suffix}\n")


def build_parser() -> argparse.ArgumentParser:
    """tokentop's parser: the live app's flags on it, and one subparser per entry of `COMMANDS`."""
    parser = _Parser(
        prog="tokentop",
        description="top for LLM inference servers: stream load at an OpenAI-compatible server, "
        "turn it up and down live, and watch TTFT, ITL and tokens/s. With no --url (and no "
        "$OPENAI_BASE_URL) it runs a demo against its built-in simulated server.",
        epilog="With no command, the live app. `tokentop CMD --help` gives a command's flags, "
        "`tokentop help` the manual's pages.",
    )
    parser.add_argument("--version", action="version", version=f"tokentop {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}", parser_class=_Parser)
    COMMANDS["live"].add_args(parser)
    for name, command in COMMANDS.items():
        more = f" More: `tokentop help {command.page}`." if command.page else ""
        what = command.what
        p = sub.add_parser(name, help=what, description=f"{what[0].upper()}{what[1:]}.{more}")
        command.add_args(p)
    return parser


def check_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Refuse a flag no command has, naming the nearest real one (``--thme`` -> ``--theme``), before argparse
    reads on: with subcommands it takes the flag's value for a command and says "invalid choice". A flag
    before a subcommand is refused too: the subcommand's own default for it would silently win."""
    commands: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            commands = dict(action.choices)
    current = parser
    before: list[str] = []  # flags given before a subcommand: its own defaults would silently replace them
    for arg in argv:
        if arg == "--":
            return
        if current is parser and arg in commands:
            if before:
                parser.error(
                    f"{' '.join(before)} before {arg!r} would be ignored: put the options after it "
                    f"(tokentop {arg} {before[0]} ...)"
                )
            current = commands[arg]
            continue
        if current is parser and arg.startswith("--") and len(arg) > 2:
            before.append(arg.partition("=")[0])
        elif current is parser and arg[:2] in parser._option_string_actions and arg[:2] != "-h":
            before.append(arg[:2])  # a short flag (-o), alone or with its value attached (-oFILE)
        if not arg.startswith("--") or len(arg) < 3:
            continue
        name = arg.partition("=")[0]
        known = [s for s in current._option_string_actions if s.startswith("--")]
        if any(k.startswith(name) for k in known):  # the flag, or an abbreviation argparse accepts
            continue
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f": did you mean {near[0]}?" if near else ""
        current.error(f"unrecognized argument {name}{hint}")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, read the command's flags into its config (a value that cannot be used: one line, exit 2),
    and run its face."""
    # numpy's OpenBLAS starts a thread per core as it loads, ~80 ms of CPU in each tokentop process that
    # imports it (the face, every worker), taken from the server under test on a shared box; tokentop does
    # no linear algebra. The workers and the simulator inherit it; a value the user set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser()
    check_flags(parser, sys.argv[1:] if argv is None else argv)
    ns = parser.parse_args(argv)
    command = COMMANDS[ns.command or "live"]
    try:
        return command.run(command.to_config(ns))
    except UsageError as exc:
        print(f"tokentop: error: {exc}", file=sys.stderr)
        return 2
    except PoolError as exc:  # the workers cannot be placed on the Ray cluster: one line
        print(f"tokentop: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
