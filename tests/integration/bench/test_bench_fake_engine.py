"""bench and calibrate against an engine that is not `EngineHandle`: the `Engine` protocol is enough."""

from __future__ import annotations

import argparse
import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import tui.bench.run as bench
from tests.support.scripted_engine import ScriptedEngine
from tui.calibrate import command as calibrate
from tui.calibrate import floor
from tui.calibrate import stream_search as calibrate_levels
from tui.cli import build_parser
from tui.cli.bench import bench_config
from tui.cli.calibrate import calibrate_config
from tui.configs import BenchConfig, RunTarget
from tui.engine.config import LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.control import guard
from tui.engine.host.probe import Probed
from tui.engine.results.files import read_results

pytestmark = pytest.mark.timeout(60)


class Factory:
    """An `EngineFactory` that makes `ScriptedEngine`s and keeps them for the test to inspect."""

    def __init__(self, **script: Any) -> None:
        self.script = script
        self.made: list[ScriptedEngine] = []

    def __call__(self, target: TargetConfig, workload: Any, load: LoadTarget, **kw: Any) -> ScriptedEngine:
        engine = ScriptedEngine(target, workload, load, **kw, **self.script)
        self.made.append(engine)
        return engine


def _probe(target: TargetConfig) -> Probed:
    assert target.api_key == "sk-fake-key"
    return Probed("fake-model")


def _bench(tmp_path: Path, factory: Factory, *flags: str) -> int:
    ns = build_parser().parse_args(
        ["bench", "--url", "http://127.0.0.1:9/v1", "--api-key", "sk-fake-key", "--concurrency", "1,2,4",
         "--requests", "4", "--slo-ttft-ms", "250", "--output", str(tmp_path / "results.json"), *flags]
    )  # fmt: skip
    return bench.run(bench_config(ns), engine_factory=factory, probe=_probe)


def test_bench_runs_its_levels_on_a_scripted_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench, "POLL_S", 0.005)
    factory = Factory()
    assert _bench(tmp_path, factory) == 0
    out, err = capsys.readouterr()

    (engine,) = factory.made
    assert engine.started and engine.stopped and not engine.probe  # bench probed itself, once
    assert engine.target.model == "fake-model" and engine.options is not None
    assert engine.options.slo_ttft_ms == 250.0
    paused = [load.paused for load in engine.loads]
    assert [load.value for load in engine.loads] == [1, 2, 2, 4, 4] and paused == [True, False] * 2 + [True]

    rows = [line.split() for line in out.splitlines() if line.startswith("c=")]
    assert [r[:3] for r in rows] == [["c=1", "5", "0"], ["c=2", "5", "0"], ["c=4", "5", "0"]]
    assert all(r[-1] == "yes" for r in rows)
    assert "knee: 2 users (100 output tok/s of a 100 peak)" in out
    assert f"results written to {tmp_path / 'results.json'}" in err

    res = read_results(tmp_path / "results.json")
    knee = res.saturation.knee
    assert (res.target.model, res.target.url, res.config.slo_ttft_ms, knee and knee.level_id) == (
        "fake-model", "http://127.0.0.1:9/v1", 250.0, 2,
    )  # fmt: skip
    assert [(lv.value, lv.completed, lv.steady) for lv in res.levels] == [
        (1.0, 5, True), (2.0, 5, True), (4.0, 5, True),
    ]  # fmt: skip
    assert [lv.output_throughput for lv in res.levels] == [50.0, 100.0, 100.0]
    assert "sk-fake-key" not in (tmp_path / "results.json").read_text()


def test_bench_stops_at_a_fatal_error_with_exit_1_and_keeps_the_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench, "POLL_S", 0.005)
    factory = Factory(fatal_at_level=2)
    assert _bench(tmp_path, factory, "--quiet") == 1
    out, err = capsys.readouterr()
    assert out == ""  # no table for a run that broke
    assert err == "tokentop: error: scripted failure at level 2\n"
    (engine,) = factory.made
    assert engine.stopped and [load.value for load in engine.loads] == [1, 2]
    res = read_results(tmp_path / "results.json")
    assert [lv.value for lv in res.levels] == [1.0, 2.0]
    assert res.fatal == "scripted failure at level 2"


def test_calibrate_reports_an_engine_that_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The engine's fatal reason reaches calibrate's one error line; the search tries no more than it must."""
    monkeypatch.setattr(calibrate_levels, "REQUEST_S", 0.2)
    monkeypatch.setattr(calibrate, "noise_floor", partial(floor.noise_floor, 0.05))
    factory = Factory(fatal_on_start="cannot connect to the scripted server")
    ns = argparse.Namespace(
        token_rate=50.0, max_streams=4, p99_budget_ms=3.0, step_duration=0.1, workers=1, lockstep=False
    )
    assert calibrate.run(calibrate_config(ns), engine_factory=factory) == 1
    out, err = capsys.readouterr()
    assert err == "tokentop: error: cannot connect to the scripted server\n"
    assert "error: cannot connect to the scripted server" in out  # the level's row says so too
    # 4 streams failed, then the two bisection steps tried 2 and 1; one engine each, each stopped
    rates = [e.initial.rate for e in factory.made]
    assert len(rates) == 3 and rates[0] == pytest.approx(2 * rates[1]) == pytest.approx(4 * rates[2])
    assert all(e.stopped and e.requests_log is not None for e in factory.made)


def test_a_level_failing_every_request_ends_early_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Something completed before (the server may be back for the next level): one warning, not an error."""
    monkeypatch.setattr(bench, "POLL_S", 0.005)
    monkeypatch.setattr(guard, "PERSISTENT_S", 0.0)
    monkeypatch.setattr(guard, "PERSISTENT_FAILURES", 2)  # (before --requests 4 failures end it silently)
    factory = Factory(failing_level=2)
    assert _bench(tmp_path, factory, "--quiet") == 0
    out, err = capsys.readouterr()
    (engine,) = factory.made
    assert [load.value for load in engine.loads] == [1, 2, 2, 4, 4]  # level 3 still ran
    (warning,) = err.splitlines()
    assert re.fullmatch(
        r"tokentop: warning: 2 users: every request failed for 0 s, none completed "
        r"\((\d+) failed: http_5xx \1\): level ended early",
        warning,
    ), warning
    rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines() if line.startswith("c=")}
    assert rows["c=1"] == ["5", "0"] and rows["c=2"][0] == "0" and rows["c=4"] == ["5", "0"], rows


def test_bench_runs_from_a_config_built_without_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The typed seam: a test (or a script) hands bench its config directly, as the CLI does."""
    monkeypatch.setattr(bench, "POLL_S", 0.005)
    factory = Factory()
    target = TargetConfig(base_url="http://127.0.0.1:9/v1", api_key="sk-fake-key")
    config = BenchConfig(
        server=RunTarget(target),
        workload=WorkloadConfig(),
        levels=(LoadTarget(concurrency=1), LoadTarget(concurrency=2)),
        requests=4,
        output=tmp_path / "results.json",
        quiet=True,
    )
    assert bench.run(config, engine_factory=factory, probe=_probe) == 0
    (engine,) = factory.made
    assert [(load.value, load.paused) for load in engine.loads] == [(1, True), (2, False), (2, True)]
    assert [lv.value for lv in read_results(tmp_path / "results.json").levels] == [1.0, 2.0]
    assert capsys.readouterr().err == ""  # quiet: no progress line, no "written to"


def test_a_level_started_inside_an_outage_waits_it_out_and_one_that_outlasts_the_bound_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An outage is a span to wait out, not a failing level: the persistent-failure rule (which would end
    level 2 after 2 failures here) and the --requests goal counted in failures hold off while the server is
    away; past `guard.OUTAGE_WAIT_S` the run stops, one line, the results kept."""
    monkeypatch.setattr(bench, "POLL_S", 0.005)
    monkeypatch.setattr(guard, "PERSISTENT_S", 0.0)
    monkeypatch.setattr(guard, "PERSISTENT_FAILURES", 2)
    monkeypatch.setattr(guard, "OUTAGE_WAIT_S", 30.0)
    factory = Factory(outage_level=2, outage_snapshots=12)  # 3 s of the scripted clock
    assert _bench(tmp_path, factory, "--quiet") == 0
    out, err = capsys.readouterr()
    assert err == ""  # no "level ended early"
    rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines() if line.startswith("c=")}
    assert rows["c=2"][0] == "5", rows  # the level ran on to its goal once the server was back
    res = read_results(tmp_path / "results.json")
    assert [lv.completed for lv in res.levels] == [5, 5, 5] and len(res.outages) == 1

    monkeypatch.setattr(guard, "OUTAGE_WAIT_S", 2.0)
    factory = Factory(outage_level=2)  # never back
    assert _bench(tmp_path, factory, "--quiet") == 1
    out, err = capsys.readouterr()
    assert err == (
        "tokentop: error: the server stopped answering at 00:00 (connect) and has not answered for 0:02: "
        "run stopped\n"
    )
    (engine,) = factory.made
    assert [load.value for load in engine.loads] == [1, 2]  # level 3 never began
    res = read_results(tmp_path / "results.json")
    assert [lv.completed for lv in res.levels] == [5, 0] and res.outages[0].end_s is None


class _EngineClock:
    """bench's `time` on the scripted engine's clock (a quarter second a snapshot), so a timed level and
    the outages the engine reports are measured on one clock."""

    def __init__(self, factory: Factory) -> None:
        self.factory = factory

    def monotonic(self) -> float:
        return self.factory.made[-1]._elapsed_s() if self.factory.made else 0.0

    def sleep(self, seconds: float) -> None:
        pass


def test_a_timed_level_started_inside_an_outage_gets_its_duration_of_up_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Level 2 (2 s) begins while the server is away for 5 s: it waits the outage out, then runs its 2 s,
    rather than ending with nothing measured."""
    factory = Factory(outage_level=2, outage_snapshots=20)
    monkeypatch.setattr(bench, "time", _EngineClock(factory))
    ns = build_parser().parse_args(
        ["bench", "--url", "http://127.0.0.1:9/v1", "--api-key", "sk-fake-key", "--concurrency", "1,2",
         "--duration", "2", "--output", str(tmp_path / "results.json"), "--quiet"]
    )  # fmt: skip
    assert bench.run(bench_config(ns), engine_factory=factory, probe=_probe) == 0
    assert capsys.readouterr().err == ""
    res = read_results(tmp_path / "results.json")
    assert [lv.completed for lv in res.levels] == [5, 5]  # level 2 measured once the server was back
    (engine,) = factory.made
    assert engine._levels[1].steps * 0.25 >= 5.0 + 2.0  # the level's own snapshots: 5 s down, 2 s up
