"""The manual ships in the package: every page is reachable by `tokentop help`, and the definitions the
panes name are on its pages."""

from __future__ import annotations

import subprocess
import sys

from tui import manual
from tui.engine.snapshot import ITL_NAMES


def _help(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui", "help", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_help_lists_every_page_and_prints_each() -> None:
    listed = _help()
    assert listed.returncode == 0, listed.stderr
    topics = [p.topic for p in manual.pages()]
    assert {"numbers", "keys", "bench", "develop"} <= set(topics)
    for topic in topics:
        assert f"  {topic} " in listed.stdout
    shown = _help("numbers")
    assert shown.returncode == 0
    assert shown.stdout == manual.page("numbers").text  # type: ignore[union-attr]


def test_a_mistyped_topic_names_the_nearest_page() -> None:
    wrong = _help("nubmers")
    assert wrong.returncode == 2
    assert "did you mean 'numbers'" in wrong.stderr
    assert wrong.stdout == ""


def test_each_page_has_a_title_and_a_summary() -> None:
    for p in manual.pages():
        assert p.text.startswith("# "), p.topic
        assert p.summary, p.topic
        assert "\t" not in p.text, p.topic


def test_every_itl_convention_the_panes_name_is_defined_on_the_numbers_page() -> None:
    numbers = manual.page("numbers")
    assert numbers is not None
    for convention in ITL_NAMES:
        assert f"`{convention}`" in numbers.text
    for term in ("TTFT", "TPOT", "E2E", "ISL / OSL", "TPS", "req/s", "Knee"):
        assert term in numbers.text
