"""Each face takes one typed config that the flag readers build; the faces themselves never see argparse."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from tui.cli import build_parser
from tui.cli.bench import bench_config
from tui.cli.calibrate import calibrate_config
from tui.cli.live import live_config
from tui.cli.results import export_config, plot_config
from tui.cli.sessions import compare_config, replay_config, sessions_config
from tui.configs import CompareConfig, ExportConfig, PlotConfig, ReplayConfig, SessionsConfig, UsageError
from tui.engine.config import LoadTarget

ROOT = Path(__file__).resolve().parents[2]
FACES = (
    "tui/app",
    "tui/bench",
    "tui/calibrate",
)
FLAG_READERS = {
    # argparse types
    "tui/argtypes.py",
    # the command layer: the parser, each command's flags and the readers into typed configs
    "tui/cli/__init__.py",
    "tui/cli/ab.py",
    "tui/cli/bench.py",
    "tui/cli/calibrate.py",
    "tui/cli/cluster.py",
    "tui/cli/help.py",
    "tui/cli/live.py",
    "tui/cli/load.py",
    "tui/cli/dispatch.py",
    "tui/cli/metrics.py",
    "tui/cli/ray_check.py",
    "tui/cli/record.py",
    "tui/cli/results.py",
    "tui/cli/sessions.py",
    "tui/cli/sim.py",
    "tui/cli/target.py",
    "tui/cli/telemetry.py",
    "tui/cli/watch.py",
    "tui/cli/workload.py",
    # the simulator is a program of its own (it imports no tokentop code) with its own flags
    "tui/sim/__main__.py",
    "tui/sim/config.py",
    "tui/sim/flags.py",
    "tui/sim/paced.py",
    "tui/sim/server.py",
}
"""Every module allowed to touch argparse, each for a reason; a new one fails until it is named here."""


def argparse_uses(source: str) -> list[int]:
    """Lines that import argparse, name an ``argparse.Namespace`` or take an ``ns``: code reading flags."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        imports = isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names)
        imports_from = isinstance(node, ast.ImportFrom) and node.module == "argparse"
        names = isinstance(node, ast.Attribute) and node.attr == "Namespace"
        takes_ns = isinstance(node, ast.arg) and node.arg == "ns"
        if imports or imports_from or names or takes_ns:
            lines.append(getattr(node, "lineno", 0))
    return sorted(set(lines))


def _python_files(place: str) -> list[Path]:
    path = ROOT / place
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def test_the_checker_finds_a_face_that_reads_flags() -> None:
    assert argparse_uses("import argparse\ndef run(ns: argparse.Namespace) -> None: ...\n") == [1, 2]
    assert argparse_uses("from argparse import Namespace\n") == [1]
    assert argparse_uses("from typing import Any\ndef run(ns: Any) -> int:\n    return ns.x\n") == [2]
    assert argparse_uses("def run(config: object) -> None: ...\n") == []


def test_no_face_reads_the_namespace() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for place in FACES
        for path in _python_files(place)
        for line in argparse_uses(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "a face takes its typed config (tui.configs), built in tui.cli"


def test_only_the_named_flag_readers_touch_argparse() -> None:
    readers = {
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tui").rglob("*.py"))
        if argparse_uses(path.read_text(encoding="utf-8"))
    }
    assert readers == FLAG_READERS


def test_bench_flags_become_one_config() -> None:
    ns = build_parser().parse_args(
        [
            "bench",
            "--url",
            "http://gpu:8000",
            "--concurrency",
            "1,4",
            "--duration",
            "3",
            "--quiet",
            "--csv",
            "t.csv",
        ]
    )  # fmt: skip
    config = bench_config(ns)
    assert config.levels == (LoadTarget(concurrency=1), LoadTarget(concurrency=4))
    assert (config.level_duration_s(0), config.level_duration_s(1), config.requests) == (3.0, 3.0, None)
    assert config.quiet and config.csv == Path("t.csv") and config.output is None
    assert config.server.demo is None and config.server.at(None).base_url == "http://gpu:8000/v1"


def test_the_demo_target_takes_the_simulators_url_once_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    config = live_config(build_parser().parse_args(["--concurrency", "2"]))
    assert config.server.demo is not None and config.load == LoadTarget(concurrency=2)
    assert config.server.at("http://127.0.0.1:43210").base_url == "http://127.0.0.1:43210/v1"


def test_a_bad_flag_is_found_while_building_the_config() -> None:
    ns = build_parser().parse_args(["bench", "--url", "http://gpu:8000", "--header", "no-colon"])
    with pytest.raises(UsageError, match="--header wants NAME:VALUE"):
        bench_config(ns)
    assert calibrate_config(build_parser().parse_args(["calibrate", "--lockstep"])).lockstep


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_the_session_commands_take_their_configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert sessions_config(_parse("sessions")) == SessionsConfig(tmp_path / "tokentop" / "sessions")
    assert sessions_config(_parse("sessions", "--dir", "x")) == SessionsConfig(Path("x"))
    replay = replay_config(_parse("replay", "s.tokentop-session", "--speed", "4", "--theme", "light"))
    assert replay == ReplayConfig(Path("s.tokentop-session"), theme="light", speed=4.0)
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b", "c"):
        (tmp_path / name).touch()
    assert compare_config(_parse("compare", "a", "b")) == CompareConfig(((Path("a"),), (Path("b"),)))
    repeats = compare_config(_parse("compare", "a,b", "c", "--threshold", "2"))
    assert (repeats.runs, repeats.threshold_pct) == (((Path("a"), Path("b")), (Path("c"),)), 2.0)
    markdown = compare_config(_parse("compare", "a", "b", "c", "--markdown", "--plot", "p.svg"))
    assert (markdown.form, markdown.plot, len(markdown.runs)) == ("markdown", Path("p.svg"), 3)
    assert compare_config(_parse("compare", "a", "b", "--json")).form == "json"
    with pytest.raises(UsageError, match="compare needs at least two runs"):
        compare_config(_parse("compare", "a,b"))
    assert compare_config(_parse("compare", "a")).runs == ((Path("a"),),)  # a `bench --ab` file holds two


def test_plot_and_export_take_their_configs() -> None:
    assert plot_config(_parse("plot", "r.json")) == PlotConfig(Path("r.json"))
    assert plot_config(_parse("plot", "r.json", "--out", "p.SVG")).out == Path("p.SVG")
    with pytest.raises(UsageError, match="the plot is SVG"):
        plot_config(_parse("plot", "r.json", "--out", "p.png"))
    appended = export_config(_parse("export", "r.json", "--to", "vllm", "--append", "--out", "v.jsonl"))
    assert appended == ExportConfig(Path("r.json"), "vllm", out=Path("v.jsonl"), append=True)
    aiperf = export_config(_parse("export", "r.json", "--to", "aiperf", "--requests-log", "q.jsonl"))
    assert (aiperf.to, aiperf.requests_log, aiperf.out) == ("aiperf", Path("q.jsonl"), None)
    with pytest.raises(UsageError, match="only with --to vllm"):
        export_config(_parse("export", "r.json", "--to", "csv", "--append"))
    with pytest.raises(UsageError, match="--to aiperf needs the per-request records"):
        export_config(_parse("export", "r.json", "--to", "aiperf"))
