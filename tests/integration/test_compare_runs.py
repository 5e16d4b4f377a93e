"""compare judges runs, not requests: the same bench twice against the same simulator is within noise
everywhere, a simulator 30 % slower is worse in tok/s and TPOT at every level; and compare's trip-ups (a
session by label or file name, results files say why they are unjudged, warnings once, the plot's ticks,
sessions under any name)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import made_once
from tests.support.engine_helpers import tokentop
from tui.engine.sessions.compare import comparison
from tui.sim.launch import SimServer

pytestmark = pytest.mark.timeout(240)
RUN = ("--concurrency", "2,4", "--duration", "4", "--isl", "16", "--osl", "32", "--workers", "1", "--quiet")
SCALE = 1.0
ENV = dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL="")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One command run twice (``same1``, ``same2``, the second with its results file too), each against its
    own simulator, and once against a simulator whose every step takes 30 % longer (``slower``). The three
    run at once, so whatever else the machine does falls on all three alike: the test is about the rule,
    `tests/perf/compare_identical_runs.py` measures it on runs one after the other."""
    return made_once(tmp_path_factory, "compare-runs", _record)


def _record(folder: Path) -> None:
    with (
        SimServer("small-gpu", time_scale=SCALE) as one,
        SimServer("small-gpu", time_scale=SCALE) as two,
        SimServer("small-gpu", time_scale=SCALE / 1.3) as slower,
    ):
        sims = {
            "same1": (one, ()),
            "same2": (two, ("--output", str(folder / "same2.json"))),
            "slower": (slower, ()),
        }
        benches = {}
        for name, (sim, more) in sims.items():
            cmd = [
                sys.executable,
                "-m",
                "tui",
                "bench",
                "--url",
                sim.url,
                *RUN,
                "--record",
                str(folder / f"{name}.run"),
            ]
            benches[name] = subprocess.Popen(
                [*cmd, *more], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
        for name, proc in benches.items():
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"{name}: {err}"


def test_identical_runs_are_within_noise_at_every_figure(runs: Path) -> None:
    data = comparison([runs / "same1.run", runs / "same2.run"])
    (pair,) = data["pairs"]
    assert len(pair["levels"]) == 2
    for level in pair["levels"]:
        judged = [d for d in level["differences"] if d.verdict in ("better", "worse")]
        assert not judged, judged
        assert sum(d.verdict == "within noise" for d in level["differences"]) >= 4  # the rates and p50s


def test_a_30_percent_slower_server_is_worse_in_tok_s_and_tpot_at_every_level(runs: Path) -> None:
    data = comparison([runs / "same1.run", runs / "slower.run"])
    (pair,) = data["pairs"]
    assert [lv["load"] for lv in pair["levels"]] == [("concurrency", 2.0), ("concurrency", 4.0)]
    for level in pair["levels"]:
        by = {d.metric: d for d in level["differences"]}
        for metric in ("output tok/s", "TPOT p50 ms"):
            assert by[metric].verdict == "worse", (level["load"], by[metric])
        assert by["output tok/s"].percent < -10 and by["TPOT p50 ms"].percent > 10


def test_repeats_on_one_side_are_compared_as_one_and_let_a_p99_be_judged(runs: Path) -> None:
    data = comparison([[runs / "same1.run", runs / "same2.run"], runs / "slower.run"])
    (pair,) = data["pairs"]
    assert pair["base"] == "same1.run+same2.run"
    for level in pair["levels"]:
        by = {d.metric: d for d in level["differences"]}
        assert by["output tok/s"].verdict == "worse"
        assert by["ITL p99 ms"].verdict == "unjudged" and "2+ runs a side" in by["ITL p99 ms"].reason
    both = comparison([[runs / "same1.run", runs / "same2.run"], [runs / "same2.run", runs / "same1.run"]])
    for level in both["pairs"][0]["levels"]:
        by = {d.metric: d for d in level["differences"]}
        assert by["ITL p99 ms"].verdict == "within noise" and by["ITL p99 ms"].interval is not None


def _compare(*args: str, state: Path | None = None) -> subprocess.CompletedProcess[str]:
    return tokentop("compare", *args, timeout_s=90, env={"XDG_STATE_HOME": str(state) if state else None})


def test_compare_finds_a_session_by_its_label_or_its_file_name(runs: Path, tmp_path: Path) -> None:
    folder = tmp_path / "tokentop" / "sessions"
    folder.mkdir(parents=True)
    shutil.copy(runs / "same1.run", folder / "20261207-101500-base.tokentop-session.gz")
    shutil.copy(runs / "slower.run", folder / "20261207-102000-tuned.tokentop-session.gz")
    done = _compare("base", "20261207-102000-tuned.tokentop-session.gz", "--json", state=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"other": "20261207-102000-tuned.tokentop-session.gz"' in done.stdout
    missing = _compare("base", "nothing-here", state=tmp_path)
    assert missing.returncode == 2
    want = f"nothing-here: no such file, and no session of that name or label in {folder}"
    assert missing.stderr.strip().endswith(want)


def test_results_files_say_why_they_are_unjudged_and_warnings_print_once(runs: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-model.json"
    other.write_text((runs / "same2.json").read_text().replace('"model": "', '"model": "x-', 1))
    done = _compare(str(runs / "same1.run"), str(other), "--plot", str(tmp_path / "c.svg"))
    assert done.returncode == 0, done.stderr
    assert f"unjudged: {other.name} is a results file: it holds no per-request samples" in done.stdout
    assert (done.stdout + done.stderr).count("model differs") == 1
    svg = (tmp_path / "c.svg").read_text()
    ticks = [line for line in svg.splitlines() if 'class="tick"' in line]
    assert any(">2</text>" in t for t in ticks) and any(">4</text>" in t for t in ticks)
    assert sum('text-anchor="end"' in t for t in ticks) >= 3  # the tok/s axis has its values


def test_sessions_lists_a_session_recorded_under_any_name(runs: Path) -> None:
    done = tokentop("sessions", "--dir", str(runs))
    assert done.returncode == 0, done.stderr
    for name in ("same1.run", "same2.run", "slower.run"):
        assert str(runs / name) in done.stdout
    assert "same2.json" not in done.stdout
