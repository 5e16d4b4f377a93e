"""The canary against a server slower than its rate (2 s to a first token, 8 canaries a second): it keeps
about a second's worth out at once, never enough to fill a small server's slots with its own queue."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.support.engine_helpers import read_jsonl
from tui.engine.config import TargetConfig
from tui.engine.host.canary import Canary, max_in_flight
from tui.sim.launch import SimServer

pytestmark = [pytest.mark.timeout(60)]


def test_a_slow_server_never_holds_more_canaries_than_a_seconds_worth(tmp_path: Path) -> None:
    truth_log = tmp_path / "truth.jsonl"
    server = SimServer("paced")
    server.args = [sys.executable, "-m", "tui.sim.paced", "--port", "0", "--token-rate", "50",
                   "--first-token-ms", "2000", "--truth-log", str(truth_log)]  # fmt: skip
    rate = 1.0
    with server as sim:
        canary = Canary(TargetConfig(base_url=sim.url, model="m", timeout_s=30.0), rate).start()
        try:
            deadline = time.monotonic() + 30.0
            while canary.figures().n < 3 and time.monotonic() < deadline:  # bounded: 3 canaries answered
                time.sleep(0.1)
        finally:
            canary.stop()
    truth = read_jsonl(truth_log)
    assert len(truth) >= 3
    spans = [(r["arrival_ns"], r["end_ns"]) for r in truth]
    most = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert most <= max_in_flight(rate) == 2, most
