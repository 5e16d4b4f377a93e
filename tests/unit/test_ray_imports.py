"""Without --ray nothing loads Ray (it costs 0.6-1 s to import and installs signal handlers), and the
placement flags become plain data without it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tui.cli import build_parser
from tui.cli.cluster import placement_from_args
from tui.configs import UsageError

FACES = (
    "import sys, tui.cli, tui.bench.run, tui.app.run, tui.app.app, tui.engine.host.handle, "
    "tui.engine.load.worker, tui.engine.remote.agent, tui.cli.ray_check; "
    "tui.cli.build_parser().parse_args(['bench', '--ray', 'auto']); "
    "print('ray' in sys.modules)"
)


def test_no_face_and_no_worker_imports_ray_until_a_pool_is_made() -> None:
    out = subprocess.run(
        [sys.executable, "-c", FACES], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "False", out.stderr


def test_the_ray_flags_become_a_placement_with_each_face_s_default_on_node_loss() -> None:
    parser = build_parser()
    assert placement_from_args(parser.parse_args(["bench"])) is None
    bench = placement_from_args(
        parser.parse_args(["bench", "--ray", "ray://head:10001", "--workers-per-node", "3"])
    )
    assert bench is not None and (bench.address, bench.per_node, bench.on_node_loss) == (
        "ray://head:10001",
        3,
        "stop",
    )
    live = placement_from_args(parser.parse_args(["--ray", "auto", "--ray-head-workers"]))
    assert live is not None and live.on_node_loss == "continue" and live.head_workers
    stop = placement_from_args(parser.parse_args(["live", "--ray", "auto", "--on-node-loss", "stop"]))
    assert stop is not None and stop.on_node_loss == "stop"
    with pytest.raises(UsageError, match="--workers-per-node needs --ray"):
        placement_from_args(parser.parse_args(["bench", "--workers-per-node", "2"]))
