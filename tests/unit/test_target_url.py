"""A URL no request could use is refused up front in one line (exit 2), never a traceback from httpx."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tui.engine.config import normalise_base_url


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:abc", "port must be a number in 1..65535, got 'abc'"),
        ("http://127.0.0.1:0", "got '0'"),
        ("http://127.0.0.1:70000", "got '70000'"),
        ("http://127.0.0.1:", "got ''"),
        ("http://:8000", "no usable host"),
        ("http://a b:8000", "no usable host"),
        ("ftp://host", "must start with http:// or https://"),
    ],
)
def test_unusable_urls_are_refused_with_the_reason(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match="URL") as info:
        normalise_base_url(url)
    assert reason in str(info.value)


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1"),
        ("https://api.example/v1/", "https://api.example/v1"),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
        ("http://localhost", "http://localhost/v1"),
    ],
)
def test_usable_urls_are_normalised(url: str, base: str) -> None:
    assert normalise_base_url(url) == base


def test_bench_with_a_bad_port_prints_one_line_and_exits_2() -> None:
    cmd = [sys.executable, "-m", "tui", "bench", "--url", "http://127.0.0.1:abc", "--requests", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=dict(os.environ), check=False)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == ["tokentop: error: URL port must be a number in 1..65535, got 'abc'"], r.stderr
    assert "Traceback" not in r.stderr


def test_a_url_without_a_scheme_is_taken_as_http_with_one_notice() -> None:
    from tui.cli import build_parser
    from tui.cli.target import base_url_from_args, url_note

    ns = build_parser().parse_args(["bench", "--url", "localhost:8000"])
    assert base_url_from_args(ns) == "http://localhost:8000/v1"
    assert url_note(ns) == "taking --url localhost:8000 as http://localhost:8000"
    ns = build_parser().parse_args(["bench", "--url", "http://localhost:8000"])
    assert url_note(ns) is None


def test_bench_names_the_nearest_flag_for_a_typo() -> None:
    for args, says in [
        (["--thme", "light"], "tokentop: error: unrecognized argument --thme: did you mean --theme?"),
        (["bench", "--concurency", "2"], "did you mean --concurrency?"),
        (["bench", "--isl=12", "--osl-dsit", "3"], "did you mean --osl-dist?"),
        (
            ["compare", "a", "b", "--jsn"],
            "tokentop compare: error: unrecognized argument --jsn: did you mean --json?",
        ),
    ]:
        r = subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ), check=False)  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert says in r.stderr and "invalid choice" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_a_flag_before_a_subcommand_is_refused_not_silently_dropped() -> None:
    """`tokentop --url X bench` would parse, and bench's own --url default would run the simulator."""
    args = ["--url", "http://127.0.0.1:9", "bench", "--requests", "1"]
    r = subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ), check=False)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--url before 'bench' would be ignored" in r.stderr and "simulator" not in r.stdout, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
