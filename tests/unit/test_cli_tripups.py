"""What a new user tripped on at the command line (#35 §3): one spelling of the output flag everywhere, and
``--sim-*`` flags refused with a target rather than silently ignored."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tui import cli
from tui.cli.bench import bench_config
from tui.cli.live import live_config
from tui.cli.results import export_config, plot_config
from tui.configs import UsageError


def _parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


@pytest.mark.parametrize("spelling", ["--output", "-o"])
@pytest.mark.parametrize(
    "command",
    [(), ("live",), ("bench",), ("watch",), ("plot", "r.json"), ("export", "r.json", "--to", "csv")],
)
def test_every_command_that_writes_a_file_takes_output_and_o(command: tuple[str, ...], spelling: str) -> None:
    assert _parse(*command, spelling, "x.svg").output == "x.svg"


def test_plot_and_export_keep_out_as_an_alias() -> None:
    assert plot_config(_parse("plot", "r.json", "--out", "p.svg")).out == Path("p.svg")
    assert export_config(_parse("export", "r.json", "--to", "csv", "--out", "t.csv")).out == Path("t.csv")
    with pytest.raises(UsageError, match=r"^--output p.png: the plot is SVG"):
        plot_config(_parse("plot", "r.json", "-o", "p.png"))


def test_a_short_output_flag_before_the_command_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["-o", "r.json", "bench"])
    assert exit_.value.code == 2
    assert "-o before 'bench' would be ignored" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("bench", "--url", "http://127.0.0.1:9", "--sim-time-scale", "10"), "--sim-time-scale is"),
        (("bench", "--url", "http://127.0.0.1:9", "--sim-profile", "flat"), "--sim-profile is"),
        (("--url", "http://127.0.0.1:9", "--sim-profile", "flat"), "--sim-profile is"),
        (
            ("bench", "--url", "h:1", "--sim-profile", "flat", "--sim-time-scale", "2"),
            "--sim-profile and --sim-time",
        ),
    ],
)
def test_sim_flags_with_a_target_are_refused_in_one_line(
    argv: tuple[str, ...], named: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert cli.main(list(argv)) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"tokentop: error: {named}") and "does not run with --url" in line


def test_sim_flags_with_the_url_variable_are_refused_and_the_demo_keeps_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(UsageError, match=r"does not run with \$OPENAI_BASE_URL"):
        bench_config(_parse("bench", "--sim-time-scale", "10", "--no-record"))
    monkeypatch.delenv("OPENAI_BASE_URL")
    demo = bench_config(_parse("bench", "--sim-time-scale", "10", "--sim-profile", "flat", "--no-record"))
    assert demo.server.demo is not None
    assert (demo.server.demo.time_scale, demo.server.demo.profile) == (10.0, "flat")
    assert live_config(_parse("--sim-profile", "flat", "--no-record")).server.demo is not None
