"""A free port on 127.0.0.1, and the simulator held on one, so a second simulator can take its place (a
server that restarts) or nothing does (a refused port)."""

from __future__ import annotations

import socket

from tui.sim.launch import SimServer


def free_port() -> int:
    """A port nothing listens on: bound, read and closed again (refused from then on)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sim_on_port(port: int) -> SimServer:
    """Half-second requests (32 tokens at time scale 4) on a fixed port, so a second one takes its place."""
    return SimServer("small-gpu", time_scale=4, extra_args=["--port", str(port)])
