"""The manual ships in the package: every page is reachable by `tokentop help`, and the definitions the
panes name are on its pages."""

from __future__ import annotations

import re
import statistics
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


def test_every_definition_the_results_carry_is_defined_in_the_manual() -> None:
    """The results file carries one-line `definitions`; the manual is where a user reads each at length, so
    every one of them must be there: a results key in backticks, or the manual's own name for the idea."""
    from tui.engine.results.definitions import DEFINITIONS

    manual_names = {
        "output tokens": "**ISL / OSL**",
        "input tokens": "**ISL / OSL**",
        "stats": "## Statistics",
        "client_saturated": "`client.saturated`",
    }
    text = "".join(p.text for p in manual.pages())
    missing = [k for k in DEFINITIONS if manual_names.get(k, f"`{k}`") not in text]
    assert not missing, f"results definitions with no definition in the manual: {missing}"


def test_every_page_is_listed_with_its_summary_and_under_the_length_a_page_keeps() -> None:
    listed = manual.listing(width=80)
    rows = listed.split("\n\n", 1)[1]
    for p in manual.pages():
        assert f"  {p.topic} " in listed, p.topic
        assert p.summary in " ".join(rows.split()), p.topic
        assert len(p.text.splitlines()) <= 150, f"{p.topic}: {len(p.text.splitlines())} lines"
    assert max(len(line) for line in listed.splitlines()) <= 80


def test_a_summary_is_the_first_sentence_of_the_first_paragraph() -> None:
    text = (
        "# Title\n\nThe pane shows what the server says (its `/metrics`), beside\nwhat was measured. More.\n"
    )
    assert manual.Page("t", "Title", text).summary == (
        "The pane shows what the server says (its `/metrics`), beside what was measured."
    )
    assert manual.Page("t", "T", "# T\n\nWeights, e.g. three. Next.\n").summary == "Weights, e.g. three."
    assert manual.Page("t", "T", "# T\n\nOne line\n\nnot this.\n").summary == "One line"


def test_the_readme_is_a_front_page_that_links_every_page() -> None:
    """The README points to each page of the manual by name and stays a front page, not a second manual."""
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    for p in manual.pages():
        assert f"(tui/manual/{p.topic}.md)" in readme, p.topic
    assert len(readme.splitlines()) <= 250
    assert "bash .ci/run" in readme and "tests/app/snapshots/readme-screenshot.svg" in readme
    assert statistics.median(_sentence_lengths(readme)) <= 20


def test_the_readme_says_to_activate_the_venv_before_its_first_bare_tokentop() -> None:
    """The set-up installs into a venv, so a bare `tokentop` is not on the PATH until it is activated: the
    README says so before its first command that calls `tokentop` by name."""
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    code = [m.start() + n.start() for m in re.finditer(r"```sh\n.*?```", readme, flags=re.S)
            for n in re.finditer(r"^tokentop\b", m.group(0), flags=re.M)]  # fmt: skip
    assert code, "no bare tokentop command in the README"
    assert ". .venv/bin/activate" in readme[: min(code)] and ".venv/bin/tokentop" in readme[: min(code)]


def _sentence_lengths(markdown: str) -> list[int]:
    """Words per sentence of a page's prose: code blocks, tables and headings left out."""
    prose = re.sub(r"```.*?```", "", markdown, flags=re.S)
    lines = [
        ln.strip() for ln in prose.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "|", "!["))
    ]
    return [len(s.split()) for s in re.split(r"(?<=[.!?])\s+", " ".join(lines)) if s.split()]


def test_every_server_signal_is_defined_on_the_server_page_under_its_results_key() -> None:
    """The server pane's signals are defined once, on the manual's server page, by the key each has in a
    level's `server` object of the results (a gauge's time-average, a rate, a histogram's ms quantiles)."""
    from tui.engine.server_metrics.kinds import GAUGES, HISTOGRAMS, RATES

    page = manual.page("server")
    assert page is not None
    keys = [f"{g}_mean" for g in GAUGES] + list(RATES) + [h.removesuffix("_s") + "_ms" for h in HISTOGRAMS]
    missing = [k for k in keys if f"| `{k}` |" not in page.text]
    assert not missing, f"server signals with no line on tui/manual/server.md: {missing}"


def test_each_commands_help_names_a_page_that_exists() -> None:
    import argparse

    from tui.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in commands.choices.items():
        if name == "help":
            continue
        description = parser.description or ""
        named = re.findall(r"`tokentop help ([\w-]+)`", description)
        assert named, f"tokentop {name} --help names no manual page"
        assert all(manual.page(topic) is not None for topic in named), (name, named)
        assert description[0].isupper(), name
