"""The Ray group: engine workers on other machines (``--ray`` and the flags that place them), read into a
`RayPlacement` as plain data; Ray itself is imported only by the engine, and only then."""

from __future__ import annotations

import argparse

from tui.argtypes import positive_int
from tui.configs import UsageError
from tui.engine.config import NodeLossPolicy, RayPlacement


def add_ray_args(
    p: argparse.ArgumentParser, *, on_node_loss: NodeLossPolicy = RayPlacement.on_node_loss
) -> None:
    """``--ray``, ``--workers-per-node``, ``--ray-head-workers``, ``--on-node-loss`` (whose default is the
    command's: the live app carries on, a bench stops with its results)."""
    g = p.add_argument_group("more than one machine (needs tokentop[ray]; `tokentop help ray`)")
    g.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the engine workers on a Ray cluster: auto, host:port, or ray://host:10001 (Ray Client)",
    )
    g.add_argument(
        "--workers-per-node",
        type=positive_int,
        metavar="N",
        help="with --ray: N workers on each node (default: --workers spread over the nodes by CPUs)",
    )
    g.add_argument(
        "--ray-head-workers",
        action="store_true",
        help="with --ray: also put workers on this machine's own node (by default none, if others exist)",
    )
    g.add_argument(
        "--on-node-loss",
        choices=["stop", "continue"],
        default=on_node_loss,
        help=f"when a Ray node is lost, or a local worker killed (OOM, kill -9): stop the run (results "
        f"saved) or split the load over the workers left as a new level (default {on_node_loss})",
    )


def placement_from_args(ns: argparse.Namespace) -> RayPlacement | None:
    """``--ray`` and its flags as plain data, or None without ``--ray``."""
    address: str | None = ns.ray
    per_node: int | None = ns.workers_per_node
    if address is None:
        if per_node is not None:
            raise UsageError("--workers-per-node needs --ray")
        return None
    return RayPlacement(
        address=address, per_node=per_node, head_workers=ns.ray_head_workers, on_node_loss=ns.on_node_loss
    )
