"""A second run against the same server is not served from the first run's prefix cache: each run's
prompts are salted (its salt saved in the results' config), and ``--repeat-prompts`` sends an earlier run's
prompts again on purpose. The simulator keeps a prefix cache as vLLM does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.engine_helpers import bench
from tui.engine.sessions.compare import comparison
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(120)


def _run(url: str, out: Path, *extra: str) -> dict[str, object]:
    r = bench("--url", url, "--concurrency", "2", "--requests", "8", "--isl", "64", "--osl", "8",
              "--output", str(out), "--quiet", *extra)  # fmt: skip
    assert r.returncode == 0, r.stderr
    results = dict(json.loads(out.read_text()))
    results["table_row"] = r.stdout.splitlines()[2]  # the level's row of the printed table
    return results


def _hit_rate(results: dict[str, object]) -> float:
    levels = results["levels"]
    assert isinstance(levels, list)
    return float(levels[0]["prefix_cache_hit_rate"])


def test_a_second_run_is_not_served_from_the_first_runs_cache(tmp_path: Path) -> None:
    with SimServer("flat", time_scale=8.0) as sim:
        first = _run(sim.url, tmp_path / "first.json")
        second = _run(sim.url, tmp_path / "second.json")
        again = _run(sim.url, tmp_path / "again.json", "--repeat-prompts", str(tmp_path / "first.json"))
    assert _hit_rate(first) < 0.05
    assert _hit_rate(second) < 0.05  # without the salt: 0.9 and more (the same prompts, all cached)
    salts = [r["config"]["prompt_salt"] for r in (first, second, again)]  # type: ignore[index]
    assert salts[0] and salts[0] != salts[1]
    assert salts[2] == salts[0]  # the first run's prompts, sent again: served from the cache on purpose
    assert _hit_rate(again) > 0.5
    # a warm cache under synthetic prompts is said, in the results as on the terminal
    assert not [n for n in first["notices"] + second["notices"] if "prefix cache" in n]  # type: ignore[operator]
    assert [n for n in again["notices"] if "prefix cache served" in n]  # type: ignore[attr-defined]
    assert " warm " in str(again["table_row"])  # and the level is marked in the table
    assert " warm " not in str(first["table_row"]) + str(second["table_row"])
    # and saved as the level's: compare warns that the two sides are the cache's, not the server's
    assert [r["levels"][0]["warm_cache"] for r in (first, second, again)] == [False, False, True]  # type: ignore[index]
    warned = [
        w for w in comparison([tmp_path / "first.json", tmp_path / "again.json"])["warnings"] if "warm" in w
    ]
    assert len(warned) == 1 and "again.json ran from a warm prefix cache" in warned[0], warned
    # lengths follow --seed whatever the salt: the runs stay comparable
    isl = [r["levels"][0]["mean_input_tokens"] for r in (first, second)]  # type: ignore[index]
    assert abs(isl[0] - isl[1]) <= 1.0
