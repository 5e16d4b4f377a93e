"""`--ab`'s pure parts: its flags read into an `AbConfig`, where each side's session goes, the results'
``ab`` section written and read back, and bench's comparison table."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.fake_engine import FakeEngine
from tests.unit.results_data import frozen_results
from tui.bench.ab import ab_table, paired_judge, run_turns, sessions_for
from tui.bench.progress import Progress
from tui.cli import build_parser
from tui.cli.bench import bench_config
from tui.cli.live import live_config
from tui.cli.sessions import run_compare
from tui.configs import CompareConfig, UsageError
from tui.engine.config import EngineOptions, LoadTarget
from tui.engine.results.ab import AbDifference, AbLevel
from tui.engine.results.files import dump_results, parse_document, to_json, write_results
from tui.engine.results.model import Ab, LevelSlo, Results
from tui.engine.sessions.ab import ab_capacity, slo_difference, turns
from tui.engine.sessions.compare import Run


def _config(*args: str, env: dict[str, str] | None = None, monkeypatch: pytest.MonkeyPatch) -> object:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TOKENTOP_AB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    ns = build_parser().parse_args(["bench", *args])
    return bench_config(ns)


def test_b_takes_as_api_but_never_as_key_or_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(
        "--url", "http://a:8000", "--header", "X-A:1", "--timeout", "7", "--ab", "b:9000",
        "--ab-model", "m-b", "--ab-header", "X-B: 2",
        env={"OPENAI_API_KEY": "sk-a", "TOKENTOP_AB_API_KEY": "sk-b"}, monkeypatch=monkeypatch,
    )  # fmt: skip
    ab = config.ab  # type: ignore[attr-defined]
    assert ab is not None and ab.mode == "parallel" and ab.threshold_pct == 10.0
    b = ab.target
    assert (b.base_url, b.model, b.api_key, b.headers) == ("http://b:9000/v1", "m-b", "sk-b", (("X-B", "2"),))
    assert b.timeout_s == 7.0 and b.endpoint == "chat" and not b.demo
    a = config.server.target  # type: ignore[attr-defined]
    assert a.api_key == "sk-a" and a.headers == (("X-A", "1"),)


def test_without_its_variable_b_has_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config("--url", "http://a:8000", "--ab", "http://b:9000", env={"OPENAI_API_KEY": "sk-a"},
                     monkeypatch=monkeypatch)  # fmt: skip
    assert config.ab.target.api_key is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ab-model", "x"], "--ab-model needs --ab URL"),
        (["--ab-header", "X:1"], "--ab-header needs --ab URL"),
        (["--ab", "http://u:pw@b:9000"], "--ab must not carry credentials"),
        (["--ab", "ftp://b"], "--ab: "),
        (["--ab", "http://b", "--ab-header", "nocolon"], "--ab-header wants NAME:VALUE"),
        (["--ab", "http://b", "--ray", "auto"], "--ab runs its two sides' workers here: drop --ray"),
    ],
)
def test_unusable_ab_flags_are_one_line(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UsageError) as info:
        _config("--url", "http://a:8000", *args, monkeypatch=monkeypatch)
    assert message in str(info.value) and "pw" not in str(info.value)


def test_the_live_app_reads_ab_in_either_mode_and_not_beside_a_baseline(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TOKENTOP_AB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    parser = build_parser()
    config = live_config(parser.parse_args(["live", "--url", "http://a:8000", "--ab", "b:9000"]))
    assert (
        config.ab is not None
        and config.ab.mode == "parallel"
        and config.ab.target.base_url == "http://b:9000/v1"
    )
    turns = live_config(parser.parse_args(["live", "--ab", "http://b", "--ab-mode", "alternate", "--ab-block",
                                           "3"]))  # fmt: skip
    assert turns.ab is not None and (turns.ab.mode, turns.ab.block_s) == ("alternate", 3.0)
    with pytest.raises(UsageError, match="--ab draws B where --baseline"):
        live_config(
            parser.parse_args(["live", "--url", "http://a", "--ab", "http://b", "--baseline", "x.json"])
        )


def test_each_side_records_a_session_beside_the_users_or_none(tmp_path: Path) -> None:
    asked = sessions_for(EngineOptions(record=str(tmp_path / "run.tokentop-session.gz")))
    assert asked.a.record == str(tmp_path / "run.tokentop-session.gz")
    assert asked.b.record == str(tmp_path / "run-b.tokentop-session.gz")
    none = sessions_for(EngineOptions(record=None))  # the verdicts need none: the pair keeps the samples
    assert none.a.record is None and none.b.record is None


def test_bench_judges_turns_by_the_pair_from_the_live_samples_and_steers_them_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = ("--url", "http://a:8000", "--ab", "http://b", "--ab-mode", "alternate", "--duration", "4")
    config = _config(*args, monkeypatch=monkeypatch)
    pair = paired_judge(config.ab, [FakeEngine(), FakeEngine()])  # type: ignore[attr-defined,list-item]  # fakes
    assert pair is not None and pair.mode == "alternate" and pair.turns is None  # run_turns steers


def _section(a: Results) -> Ab:
    worse = AbDifference(metric="output tok/s", a=330.0, b=193.8, change_pct=-41.3, verdict="worse",
                         ci95_pct=(-45.0, -38.0))  # fmt: skip
    tail = AbDifference(metric="TTFT p99 ms", a=60.0, b=20.0, change_pct=-66.7, verdict="unjudged",
                        reason="a p99 moves between identical runs")  # fmt: skip
    level = AbLevel(mode="concurrency", value=2.0, a_level_id=1, b_level_id=1, differences=(worse, tail))
    b = replace(a, levels=a.levels[:1])
    return Ab(mode="parallel", threshold_pct=10.0, b=b, levels=(level,))


def test_the_ab_section_is_written_and_read_back_whole() -> None:
    a = frozen_results()
    doc = replace(a, ab=replace(_section(a), capacity=ab_capacity(a, a)))
    back = parse_document(to_json(doc))
    assert back == doc
    assert to_json(a).keys() == to_json(parse_document(to_json(a))).keys() and "ab" not in to_json(a)
    written = to_json(doc)["ab"]["levels"][0]["differences"]
    assert "reason" not in written[0] and "ci95_pct" not in written[1]  # each only where it says something
    assert b"sk-never-written" not in dump_results(doc)


def test_bench_table_shows_the_judged_figures_and_why_others_are_not() -> None:
    text = ab_table(_section(frozen_results()))
    lines = text.splitlines()
    assert lines[0].startswith("B vs A (parallel)") and "±10 %" in lines[0]
    assert lines[2].split() == ["2", "users", "output", "tok/s", "330", "193.8", "-41.3", "%", "worse"]
    assert "TTFT p99" not in text  # the table shows the p50s and throughput; the results hold the rest
    assert all(line == line.rstrip() for line in lines)
    a = frozen_results()  # its run had a TTFT objective: the line says the load each side serves at it
    b = replace(
        a, levels=tuple(replace(lv, slo=_slo(m)) for lv, m in zip(a.levels, (80, 80, 80, 70), strict=True))
    )
    a = replace(
        a, levels=tuple(replace(lv, slo=_slo(m)) for lv, m in zip(a.levels, (80, 79, 80, 80), strict=True))
    )
    section = replace(_section(a), capacity=ab_capacity(a, b))
    assert ab_table(section).splitlines()[-1] == (
        "B serves 4 users at the SLO, A 8 users (95 % of requests by the lower bound)"
    )
    # in turns a side's levels at a load pool: 79 of 80 alone is short of 95 %, beside 80 of 80 it is not
    pooled = replace(a, levels=(*a.levels[1:2], replace(a.levels[1], level_id=5, slo=_slo(80))))
    assert (ab_capacity(pooled, b).a.value, ab_capacity(pooled, b).a.requests) == (2, 160)  # type: ignore[union-attr]
    assert ab_capacity(replace(a, levels=a.levels[1:2]), b).a is None  # type: ignore[union-attr]
    assert ab_capacity(replace(a, capacity_at_slo=None), b) is None  # no SLO: no line


def _slo(met: int, requests: int = 80) -> LevelSlo:
    return LevelSlo(
        attainment=met / requests, attainment_low=0.0, attainment_high=1.0, met=met, requests=requests
    )


def test_compare_reads_an_ab_file_alone_and_refuses_one_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = frozen_results()
    write_results(replace(a, ab=_section(a)), tmp_path / "ab.json")
    write_results(a, tmp_path / "plain.json")
    assert run_compare(CompareConfig(runs=((tmp_path / "ab.json",),))) == 0
    out = capsys.readouterr().out
    assert f"B: {a.target.url} vs A: {a.target.url}" in out and "2 users: errors 0 -> 0" in out
    assert "output tok/s" in out and "-41.3 %  worse" in out
    assert run_compare(CompareConfig(runs=((tmp_path / "plain.json",),))) == 1
    assert (
        "plain.json: no A/B section (bench --ab): compare needs at least two runs" in capsys.readouterr().err
    )


def test_alternate_needs_level_times(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="alternate holds each side for --duration"):
        _config(
            "--url", "http://a:8000", "--ab", "http://b", "--ab-mode", "alternate", monkeypatch=monkeypatch
        )
    config = _config("--url", "http://a:8000", "--ab", "http://b", "--ab-mode", "alternate",
                     "--duration", "30", "--ab-block", "5", monkeypatch=monkeypatch)  # fmt: skip
    assert (config.ab.mode, config.ab.block_s) == ("alternate", 5.0)  # type: ignore[attr-defined]


class _Side:
    """An engine as `run_turns` sees it: its load changes, in one shared order."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def set_load(self, load: LoadTarget) -> None:
        self.log.append(f"{self.name} {'paused' if load.paused else 'on'}")

    def snapshot(self) -> SimpleNamespace:
        return SimpleNamespace(fatal=None)


def test_turns_go_a_b_b_a_each_after_the_last_side_rests() -> None:
    log: list[str] = []
    a, b = _Side("A", log), _Side("B", log)
    sides: list[Any] = [a, b]
    load = LoadTarget(concurrency=2)

    def rest(engine: Any) -> str | None:
        engine.set_load(replace(load, paused=True))
        return None

    # 0.05 s a side in turns of at most 0.02 s: three turns each, A first
    progress = Progress(io.StringIO(), quiet=True)
    assert run_turns(sides, load, (0.05, 0.02), progress, "", rest) is None
    # A B, B A, A B: each side rests (paused and idle) before the next turn, its own included
    assert log == ["A on", "A paused", "B on", "B paused", "B on", "B paused", "A on", "A paused", "A on",
                   "A paused", "B on"]  # fmt: skip

    def failing(engine: Any) -> str | None:
        return "stuck" if engine is b else None

    assert run_turns(sides, load, (0.05, 0.02), progress, "", failing) == "B: stuck"  # B would not rest


def test_a_sides_turns_at_each_load_are_its_repeats() -> None:
    def level(level_id: int, users: int, done: int) -> dict[str, Any]:
        return {"level_id": level_id, "mode": "concurrency", "concurrency": users, "level_completed": done}

    levels = [level(1, 2, 0), level(2, 2, 5), level(3, 2, 6), level(4, 4, 7), level(5, 4, 8)]
    run = Run(Path("b.tokentop-session.gz"), {"levels": levels})
    got = [[lv["level_id"] for lv in r.levels()] for r in turns(run)]
    assert got == [[2, 4], [3, 5]]  # the paused start (level 1, nothing sent) is no turn


def test_slo_attainment_is_judged_by_whether_the_wilson_intervals_overlap() -> None:
    def turns_of(*met: int) -> list[dict[str, Any]]:
        return [{"slo": {"met": m, "requests": 100}} for m in met]

    worse = slo_difference(turns_of(95, 97), turns_of(60, 70))
    assert worse is not None and (worse.verdict, worse.a, worse.b) == ("worse", 0.96, 0.65)
    assert worse.change_pct == pytest.approx((0.65 - 0.96) / 0.96 * 100)
    close = slo_difference(turns_of(95), turns_of(92))  # 3 points apart in 100 requests: intervals overlap
    assert close is not None and close.verdict == "within noise"
    better = slo_difference(turns_of(50), turns_of(90))
    assert better is not None and better.verdict == "better"
    assert slo_difference([{"slo": None}], turns_of(90)) is None  # no objective: no row
