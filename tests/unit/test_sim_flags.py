"""`tokentop sim` and `python -m tui.sim` take the same flags, declared once in `tui.sim.flags`."""

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


def test_tokentop_sim_has_exactly_the_simulators_flags() -> None:
    own = argparse.ArgumentParser()
    add_sim_args(own)
    assert _options(_sim_subparser()) == _options(own)
    assert {"--no-metrics", "--state-log"} <= _options(own)


def test_the_metrics_flags_reach_the_config_and_default_without_them() -> None:
    config = config_from_args(build_parser().parse_args(["sim", "--no-metrics", "--state-log", "s.jsonl"]))
    assert config.metrics is False and str(config.state_log) == "s.jsonl"
    default = config_from_args(build_parser().parse_args(["sim"]))
    assert default.metrics is True and default.state_log is None
