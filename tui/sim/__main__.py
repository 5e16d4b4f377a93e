"""`python -m tui.sim [flags]`: the simulator alone, with every flag it owns (`tui.sim.flags`)."""

from __future__ import annotations

import argparse

from tui.sim.flags import add_sim_args
from tui.sim.server import run_from_args


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.sim", description="tokentop's simulated server")
    add_sim_args(parser)
    return run_from_args(parser.parse_args())


if __name__ == "__main__":  # importing the module (the import hygiene test walks every one) starts nothing
    raise SystemExit(main())
