"""The demo: the built-in simulator that a face starts itself when no ``--url`` is given.

One place for what the live app and the headless bench both do: start `tui.sim.launch.SimServer` on
127.0.0.1, hand the face its URL, and stop it however the face ends (return, error, Ctrl-C). Import-light
(the simulator is imported only when a demo actually starts), so `tokentop --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

DEMO_PROFILE = "small-gpu"
"""The simulator profile of the demo unless ``--sim-profile`` says otherwise."""
START_TIMEOUT_S = 10.0
"""How long the simulator may take to print its URL and answer ``/v1/models``."""


class DemoError(Exception):
    """The built-in simulator did not start; the message is one line, fit to print."""


@dataclass(frozen=True)
class DemoConfig:
    """How to run the built-in simulator for a face."""

    profile: str = DEMO_PROFILE
    seed: int = 0
    time_scale: float = 1.0
    """The simulator runs this many times faster than its profile (tests, quick demos)."""


@contextmanager
def running_demo(config: DemoConfig | None) -> Iterator[str | None]:
    """Yield the demo simulator's URL (``http://127.0.0.1:PORT/v1``), or None when ``config`` is None (the
    user gave ``--url``); the simulator is stopped when the block ends, however it ends. Raises `DemoError`
    if it cannot start."""
    if config is None:
        yield None
        return
    from tui.sim.launch import SimServer

    sim = SimServer(config.profile, seed=config.seed, time_scale=config.time_scale)
    try:
        sim.start(timeout_s=START_TIMEOUT_S)
    except Exception as exc:  # a missing interpreter, a bad profile, a timeout: all one line for the face
        lines = str(exc).splitlines() or [type(exc).__name__]
        raise DemoError(lines[0]) from None
    try:
        yield sim.url
    finally:
        sim.stop()
