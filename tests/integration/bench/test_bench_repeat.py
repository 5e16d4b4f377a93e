"""`bench --repeat N`: the whole sweep N times against one server, each run with its own numbered outputs and
session, and `tokentop compare LABEL` takes the N sessions as one side's repeats (the noise between runs), as
compare given one of the N results files takes the set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tui.bench.run as bench_run
from tui.bench.repeats import repeat_config, repeat_path, unnumbered
from tui.cli import build_parser
from tui.cli.bench import bench_config
from tui.cli.record import find_runs, sessions_dir
from tui.cli.sessions import compare_command, compare_config
from tui.configs import CompareConfig
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.recording.file import SUFFIX, SessionWriter, read_header
from tui.engine.recording.recorder import SessionRecorder
from tui.engine.results.files import read_results
from tui.engine.results.repeat import RepeatSet


def test_each_run_of_a_repeat_gets_its_own_numbered_outputs_and_session() -> None:
    ns = build_parser().parse_args(
        ["bench", "--concurrency", "1", "--repeat", "3", "--output", "out/run.json", "--csv", "t.csv",
         "--vllm-results", "vllm", "--record", "s" + SUFFIX]
    )  # fmt: skip
    config = bench_config(ns)
    assert config.repeat == 3
    second = repeat_config(config, 2)
    assert (second.output, second.csv, second.vllm_results) == (
        Path("out/run-2.json"),
        Path("t-2.csv"),
        Path("vllm-2"),
    )
    assert second.options.record == f"s-2{SUFFIX}" and second.options.record_repeat == "s"
    assert repeat_path(Path("a/b.tar.gz"), 4) == Path("a/b.tar-4.gz")
    for path in (
        Path("out/run.json"),
        Path("a/b.tar.gz"),
        Path(f"s{SUFFIX}"),
        Path("x-2.json"),
        Path("vllm"),
    ):
        assert unnumbered(repeat_path(path, 2), 2) == path  # compare finds a set's files by their names
    assert unnumbered(Path("run-2.json"), 3) is None and unnumbered(Path("-2.json"), 2) is None
    assert {repeat_config(config, k).options.repeat_of for k in (1, 2)} == {("s", 1, 3), ("s", 2, 3)}
    # each run its own prompts (a server's prefix cache keeps the last run's), unless asked for the same
    assert len({repeat_config(config, k).workload.prompt_salt for k in (1, 2, 3)}) == 3
    same = bench_config(build_parser().parse_args(["bench", "--repeat", "2", "--repeat-prompts", "abcd1234"]))
    assert {repeat_config(same, k).workload.prompt_salt for k in (1, 2)} == {"abcd1234"}
    once = bench_config(build_parser().parse_args(["bench", "--output", "r.json", "--no-record"]))
    assert repeat_config(once, 1) is once and once.repeat == 1  # one run: its paths as given


def _session(path: Path, label: str, repeat: str | None) -> Path:
    header = {"label": label, "t0_ns": 0, **({"repeat": repeat} if repeat else {})}
    SessionWriter(path, header).close()
    return path


def test_a_label_names_every_session_of_its_newest_repeat_set(tmp_path: Path) -> None:
    """By label: the newest session's set, all of it; an older set or a single run of the label is not in
    it. By path or file name: that one run."""
    old = _session(tmp_path / f"20260101-000000-x-1{SUFFIX}", "x", "20260101-000000-x")
    first = _session(tmp_path / f"20260102-000000-x-1{SUFFIX}", "x", "20260102-000000-x")
    second = _session(tmp_path / f"20260102-000000-x-2{SUFFIX}", "x", "20260102-000000-x")
    assert find_runs("x", tmp_path) == (first, second)
    assert find_runs(second.name, tmp_path) == (second,) and find_runs(str(old), tmp_path) == (old,)
    single = _session(tmp_path / f"20260103-000000-x{SUFFIX}", "x", None)
    assert find_runs("x", tmp_path) == (single,)
    assert read_header(tmp_path / "missing") is None


def test_a_repeated_sweep_runs_whole_each_time_and_compare_takes_its_sessions_as_one_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a scripted engine (no server): the sweep twice, each run on its own engine with its numbered
    results and its own table; the sessions the real engine records then carry the set, and compare takes
    them by the label as one side."""
    from tests.integration.bench.test_bench_fake_engine import Factory, _probe

    monkeypatch.setattr(bench_run, "POLL_S", 0.005)
    factory = Factory()
    ns = build_parser().parse_args(
        ["bench", "--url", "http://127.0.0.1:9/v1", "--api-key", "sk-fake-key", "--concurrency", "1,2",
         "--requests", "4", "--repeat", "2", "--output", str(tmp_path / "run.json"), "--no-record"]
    )  # fmt: skip
    assert bench_run.run(bench_config(ns), engine_factory=factory, probe=_probe) == 0
    out, err = capsys.readouterr()
    assert len(factory.made) == 2 and all(e.started and e.stopped for e in factory.made)
    assert "run 1 of 2" in err and "run 2 of 2" in err
    assert sum(line.startswith("c=1 ") for line in out.splitlines()) == 2
    assert not (tmp_path / "run.json").exists()
    runs = [tmp_path / f"run-{k}.json" for k in (1, 2)]
    assert [len(read_results(path).levels) for path in runs] == [2, 2]
    _results_files_of_the_set_are_one_side(runs, tmp_path, capsys)
    # the sessions of a set, as the recorder writes them (`record_repeat`), are one side by their label
    label = f"rep-{tmp_path.name}"
    folder = sessions_dir()
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"20260102-000000-{label}-{k}{SUFFIX}" for k in (1, 2)]
    for path in paths:
        options = EngineOptions(
            record=str(path), record_label=label, record_repeat=f"20260102-000000-{label}"
        )
        target = TargetConfig(base_url="http://h/v1")
        SessionRecorder(path, target=target, workload=WorkloadConfig(), load=LoadTarget(), options=options,
                        workers=1, t0_ns=0, started_at_s=0.0).close()  # fmt: skip
    config = compare_config(build_parser().parse_args(["compare", label, label, "--json"]))
    assert config.runs == (tuple(paths), tuple(paths))
    # one session of the set given by path is the set too, as a results file is; run against run stays so
    by_path = compare_config(build_parser().parse_args(["compare", str(paths[1]), str(runs[0]), "--json"]))
    assert by_path.runs[0] == tuple(paths)
    assert (
        by_path.notes[0]
        == f"{paths[1].name}: one of a set of 2, compared as the set (--no-repeat-sets: alone)"
    )
    each = compare_config(build_parser().parse_args(["compare", str(paths[0]), str(paths[1]), "--json"]))
    assert each.runs == ((paths[0],), (paths[1],))


def _results_files_of_the_set_are_one_side(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each results file carries the set; compare given one takes the set beside it as that side, says so,
    and takes it alone with --no-repeat-sets, where another side holds one of the set, or none is near."""
    sets = [read_results(path).repeat for path in runs]
    assert sets[0] is not None and sets[0].set_id  # no session recorded: an id of its own
    assert sets == [RepeatSet(set_id=sets[0].set_id, run=k, runs=2) for k in (1, 2)]
    other = tmp_path / "other.json"
    doc = json.loads(runs[0].read_text())
    del doc["repeat"]
    other.write_text(json.dumps(doc))

    def config(*args: str) -> CompareConfig:
        return compare_config(build_parser().parse_args(["compare", *args]))

    taken = config(str(runs[1]), str(other))
    assert taken.runs == (tuple(runs), (other,))
    assert taken.notes == ("run-2.json: one of a set of 2, compared as the set (--no-repeat-sets: alone)",)
    assert compare_command(taken) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == taken.notes[0] and "other.json vs run-1.json+run-2.json" in out
    alone = config(str(runs[1]), str(other), "--no-repeat-sets")
    assert alone.runs == ((runs[1],), (other,)) and alone.notes == ()
    each = config(str(runs[0]), str(runs[1]))
    assert each.runs == ((runs[0],), (runs[1],))
    assert (
        each.notes[0] == "run-1.json: one of a set of 2, compared alone (another side holds one of its set)"
    )
    apart = tmp_path / "apart"
    apart.mkdir()
    (apart / "run-2.json").write_text(runs[1].read_text())
    lone = config(str(apart / "run-2.json"), str(other))
    assert lone.runs == ((apart / "run-2.json",), (other,))
    assert lone.notes == (
        "run-2.json: one of a set of 2, compared alone (no other run of its set beside it)",
    )
