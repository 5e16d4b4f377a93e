"""A server that fails every request ends the bench run in seconds, with one line, exit 1: the users' back-off
used to make ``--requests 200`` against it wait minutes for 200 failures per level."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.support.engine_helpers import bench
from tests.support.fault_server import FaultServer
from tui.engine.control.guard import PERSISTENT_FAILURES, PERSISTENT_S

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize("load", [["--concurrency", "4,8"], ["--rate", "5,10"]], ids=["users", "rate"])
def test_an_always_failing_server_ends_the_run_in_bounded_time(load: list[str], tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    with FaultServer(500) as server:
        t0 = time.monotonic()
        r = bench("--url", server.url, *load, "--requests", "200", "--output", str(out), timeout_s=60)
        elapsed_s = time.monotonic() - t0
        hits = server.hits
    assert r.returncode == 1, r.stderr
    # a few seconds, not 200 failures' worth of back-off (~100 s); the slack is a busy machine's start-up
    assert elapsed_s < PERSISTENT_S + 25, elapsed_s
    assert PERSISTENT_FAILURES <= hits < 200, hits
    errors = [line for line in r.stderr.splitlines() if line.startswith("tokentop: error:")]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    said = re.fullmatch(
        r"tokentop: error: every request failed for (\d+) s, none completed "
        r"\((\d+) failed: http_5xx \2\): run stopped",
        errors[0],
    )
    assert said is not None, errors[0]
    assert int(said[1]) >= PERSISTENT_S  # (more on a busy machine: 8 failures take longer to come)
    assert PERSISTENT_FAILURES <= int(said[2]) <= hits  # (a request may have been on its way meanwhile)
    doc = json.loads(out.read_text())
    assert len(doc["levels"]) == 1  # the second level never started
    assert doc["totals"]["completed"] == 0 and doc["totals"]["failed"] <= hits
