"""Each face takes one typed config that the flag readers build; the faces themselves never see argparse."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tui.cli import build_parser
from tui.engine.config import LoadTarget
from tui.face_options import bench_config, calibrate_config, live_config
from tui.options import UsageError

ROOT = Path(__file__).resolve().parents[2]
FACES = ("tui/app", "tui/bench", "tui/calibrate")


def argparse_uses(source: str) -> list[int]:
    """Lines that import argparse or name an ``argparse.Namespace``: a face reading flags itself."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        imports = isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names)
        imports_from = isinstance(node, ast.ImportFrom) and node.module == "argparse"
        names = isinstance(node, ast.Attribute) and node.attr == "Namespace"
        if (imports or imports_from or names) and isinstance(node, ast.stmt | ast.expr):
            lines.append(node.lineno)
    return lines


def test_the_checker_finds_a_face_that_reads_flags() -> None:
    assert argparse_uses("import argparse\ndef run(ns: argparse.Namespace) -> None: ...\n") == [1, 2]
    assert argparse_uses("from argparse import Namespace\n") == [1]
    assert argparse_uses("def run(config: object) -> None: ...\n") == []


def test_no_face_reads_the_namespace() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in FACES
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line in argparse_uses(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "a face takes its typed config (tui.configs), built in tui.face_options"


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
