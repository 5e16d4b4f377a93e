"""`tokentop bench` with ``$OPENAI_BASE_URL`` and no ``--url`` runs against that server (and says so in its
first line) instead of starting the demo simulator; ``--url`` wins over it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine_helpers import tokentop
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(60)
RUN = ("--concurrency", "1", "--requests", "2", "--isl", "16", "--osl", "4")


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("small-gpu", time_scale=4.0) as server:
        yield server


def _bench(base_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return tokentop("bench", *args, timeout_s=45, env={"OPENAI_BASE_URL": base_url})


def test_the_variable_is_used_and_named_in_the_first_line(sim: SimServer, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    without_v1 = sim.url.removesuffix("/v1")
    r = _bench(without_v1, *RUN, "--output", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == f"using $OPENAI_BASE_URL={without_v1}", r.stderr
    assert "simulator" not in r.stderr
    results = json.loads(out.read_text())
    assert results["target"]["url"] == sim.url
    assert results["levels"][0]["completed"] >= 2


def test_url_wins_over_the_variable(sim: SimServer, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    r = _bench("http://127.0.0.1:9", "--url", sim.url, *RUN, "--output", str(out))  # nothing listens on 9
    assert r.returncode == 0, r.stderr
    assert "OPENAI_BASE_URL" not in r.stderr
    assert json.loads(out.read_text())["target"]["url"] == sim.url
