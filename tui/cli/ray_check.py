"""`tokentop ray-check`: before a run on a Ray cluster, each node as the run would see it (versions, CPUs,
its clock against this machine's, whether it reaches the target), so a mismatch or a ``localhost`` URL
only this machine serves is found before any load."""

from __future__ import annotations

import sys


def run(address: str, url: str | None) -> int:
    """Print a line per node of the cluster at ``address``; exit 1 with one line on a version mismatch or
    a node that cannot reach ``url`` (``--url``)."""
    from tui.engine.host.pool import PoolError

    try:
        from tui.engine.host.ray_pool import ray_check
    except ImportError:
        print("tokentop: error: ray-check needs Ray: pip install 'tokentop[ray]'", file=sys.stderr)
        return 1
    if url is not None:
        from tui.engine.config import normalise_base_url

        try:
            url = normalise_base_url(url)
        except ValueError as exc:
            print(f"tokentop: error: {exc}", file=sys.stderr)
            return 2
    try:
        lines = ray_check(address, url)
    except PoolError as exc:
        print(f"tokentop: error: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 1 if any("CANNOT reach" in line for line in lines) else 0
