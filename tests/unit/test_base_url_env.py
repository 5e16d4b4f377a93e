"""``$OPENAI_BASE_URL`` is the target when ``--url`` is not given, as the OpenAI SDK reads it; ``--url`` wins,
an empty value counts as unset (the demo), and its credentials are never shown."""

from __future__ import annotations

import argparse

import pytest

from tui.cli import build_parser
from tui.cli.target import demo_from_args, target_from_args, url_from_args, url_note
from tui.configs import UsageError


def _ns(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["bench", *argv])


def test_the_variable_is_the_target_when_no_url_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-box:8000")
    ns = _ns()
    assert url_from_args(ns) == "http://gpu-box:8000"
    assert demo_from_args(ns) is None
    target = target_from_args(ns)
    assert target.base_url == "http://gpu-box:8000/v1" and not target.demo
    assert url_note(ns) == "using $OPENAI_BASE_URL=http://gpu-box:8000"


def test_url_wins_over_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-box:8000")
    ns = _ns("--url", "http://other:9000/v1")
    assert target_from_args(ns).base_url == "http://other:9000/v1"
    assert url_note(ns) is None


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_variable_leaves_the_demo(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", value)
    ns = _ns()
    assert url_from_args(ns) is None and url_note(ns) is None
    assert demo_from_args(ns) is not None
    assert target_from_args(ns, demo_url="http://127.0.0.1:5/v1").demo


def test_without_the_variable_it_is_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert demo_from_args(_ns()) is not None


def test_credentials_in_the_variable_are_refused_without_being_repeated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://me:hunter2@gpu-box:8000/v1")
    ns = _ns()
    assert url_note(ns) == "using $OPENAI_BASE_URL=http://gpu-box:8000/v1"
    with pytest.raises(UsageError, match=r"^\$OPENAI_BASE_URL must not carry credentials") as info:
        target_from_args(ns)
    assert "hunter2" not in str(info.value)


def test_a_bad_variable_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-box:abc")
    with pytest.raises(UsageError, match=r"^\$OPENAI_BASE_URL: URL port must be a number"):
        target_from_args(_ns())
