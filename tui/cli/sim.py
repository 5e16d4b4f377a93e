"""`tokentop sim`: the simulator's own flags (`tui.sim.flags`, shared with `python -m tui.sim`), read by its
own reader into a `SimConfig`, and its run. ``--list-profiles`` is a config of its own: it starts nothing."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from tui.configs import UsageError
from tui.sim.config import SimConfig, config_from_args
from tui.sim.flags import add_sim_args as add_sim_args


@dataclass(frozen=True)
class ListProfiles:
    """``--list-profiles``: print the simulator's profiles and exit."""


def sim_config(ns: argparse.Namespace) -> SimConfig | ListProfiles:
    """The flags as the simulator's config; a value it refuses is a `UsageError`."""
    if ns.list_profiles:
        return ListProfiles()
    try:
        return config_from_args(ns)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def run(config: SimConfig | ListProfiles) -> int:
    """Serve until stopped (exit 0; 1 if it cannot listen), or print the profiles."""
    from tui.sim.server import list_profiles
    from tui.sim.server import run as serve

    if isinstance(config, ListProfiles):
        print(list_profiles())
        return 0
    return serve(config)
