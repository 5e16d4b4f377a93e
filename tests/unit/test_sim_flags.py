"""The simulator's own flags (`python -m tui.sim`, `tui.sim.flags`) cover every `tokentop sim` flag.

Until `tui.cli` delegates to `tui.sim.flags.add_sim_args`, the two declare the sim's flags apart; this keeps
them from drifting: a flag added to `tokentop sim` and not to the simulator's own parser fails here.
"""

from __future__ import annotations

import argparse

from tui.cli import build_parser
from tui.sim.config import config_from_args
from tui.sim.flags import add_sim_args


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {opt for action in parser._actions for opt in action.option_strings}


def _sim_subparser() -> argparse.ArgumentParser:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sim = action.choices["sim"]
            assert isinstance(sim, argparse.ArgumentParser)
            return sim
    raise AssertionError("no sim subcommand")


def test_every_tokentop_sim_flag_is_a_simulator_flag() -> None:
    own = argparse.ArgumentParser()
    add_sim_args(own)
    assert _options(_sim_subparser()) <= _options(own)
    assert {"--no-metrics", "--state-log"} <= _options(own)


def test_the_new_flags_reach_the_config_and_default_without_them() -> None:
    own = argparse.ArgumentParser()
    add_sim_args(own)
    config = config_from_args(own.parse_args(["--no-metrics", "--state-log", "s.jsonl"]))
    assert config.metrics is False and str(config.state_log) == "s.jsonl"
    old = config_from_args(build_parser().parse_args(["sim"]))  # tokentop sim: no such flags yet
    assert old.metrics is True and old.state_log is None
