"""What `tokentop bench` checks before it starts anything: a broken dataset with no --url is one line and
exit status 2, and the demo simulator is never started for it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

_RUN_MAIN = (
    "import sys\n"
    "from tui.cli import main\n"
    "status = main(sys.argv[1:])\n"
    # running_demo imports the simulator's launcher only when it starts one
    "print('sim-launched' if 'tui.sim.launch' in sys.modules else 'no-sim')\n"
    "sys.exit(status)\n"
)


def test_a_bad_dataset_fails_before_the_demo_simulator_starts(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"prompt": "a"}\n{"prompt": \n')
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", _RUN_MAIN, "bench", "--dataset", str(broken), "--requests", "1"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=False,
    )
    took_s = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tokentop: error: {broken} line 2: not valid JSON"), lines
    assert "simulator" not in proc.stderr
    assert proc.stdout.strip() == "no-sim"
    assert took_s < 10.0  # the simulator alone takes about a second to start; nothing of the kind here


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--csv", "no-such-dir/x.csv", "--csv: directory does not exist"),
        ("--plot", "no-such-dir/x.svg", "--plot: directory does not exist"),
        ("--plot", "plot.png", "--plot writes SVG"),
        ("--vllm-results", "no-such-dir/deeper/vllm", "--vllm-results: directory does not exist"),
        ("--server-metrics-log", "no-such-dir/m.jsonl", "--server-metrics-log: directory does not exist"),
    ],
)
def test_an_unwritable_output_fails_before_any_load(tmp_path: Path, flag: str, value: str, says: str) -> None:
    """Each output path is tried before the run: one line, exit 2, the simulator never started (a missing
    folder used to be found after the whole sweep, with exit 1)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    proc = subprocess.run(
        [sys.executable, "-c", _RUN_MAIN, "bench", "--requests", "1", flag, value],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
    assert proc.stdout.strip() == "no-sim"
    assert not list(tmp_path.iterdir())  # nothing was written
