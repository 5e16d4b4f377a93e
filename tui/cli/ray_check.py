"""`tokentop ray-check`: before a run on a Ray cluster, each node as the run would see it (versions, CPUs,
its clock against this machine's, whether it reaches the target), so a mismatch or a ``localhost`` URL
only this machine serves is found before any load."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from tui.configs import UsageError
from tui.engine.config import RayPlacement, normalise_base_url


@dataclass(frozen=True)
class RayCheckConfig:
    """The cluster to look at, and the server each node must reach (None: not checked)."""

    address: str = RayPlacement.address
    url: str | None = None


def add_ray_check_args(p: argparse.ArgumentParser) -> None:
    """``--ray ADDRESS`` and ``--url``."""
    p.add_argument(
        "--ray", default=RayCheckConfig.address, metavar="ADDRESS", help="auto, host:port or ray://host:10001"
    )
    p.add_argument("--url", help="the server the nodes must reach (checked from each node)")


def ray_check_config(ns: argparse.Namespace) -> RayCheckConfig:
    """The flags, the URL normalised as a load command would (a bad one is a `UsageError`)."""
    url: str | None = ns.url
    if url is not None:
        try:
            url = normalise_base_url(url)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return RayCheckConfig(address=ns.ray, url=url)


def run(config: RayCheckConfig) -> int:
    """Print a line per node of the cluster; exit 1 with one line on a version mismatch or a node that
    cannot reach the URL."""
    from tui.engine.host.pool import PoolError

    try:
        from tui.engine.host.ray_pool import ray_check
    except ImportError:
        print("tokentop: error: ray-check needs Ray: pip install 'tokentop[ray]'", file=sys.stderr)
        return 1
    try:
        lines = ray_check(config.address, config.url)
    except PoolError as exc:
        print(f"tokentop: error: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 1 if any("CANNOT reach" in line for line in lines) else 0
