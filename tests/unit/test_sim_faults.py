"""Fault flags and the seeded text table: parsing and determinism, no server."""

from __future__ import annotations

import random

import pytest

from tui.sim.faults import FaultConfig, fault_args, parse_fault_specs
from tui.sim.response_text import WordTable


def test_fault_specs_parse_into_rates_and_a_queue_threshold() -> None:
    config = parse_fault_specs(["stall=0.1", "error500=0.25", "queue503=8"])
    assert config.rates == (("error500", 0.25), ("stall", 0.1))
    assert config.queue503 == 8


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope=0.1", "unknown fault kind"),
        ("error500", "KIND=RATE"),
        ("error500=1.5", "from 0 to 1"),
        ("error500=abc", "from 0 to 1"),
        ("queue503=-1", ">= 0"),
        ("queue503=x", "whole number"),
    ],
)
def test_bad_fault_specs_say_why(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_fault_specs([spec])


def test_fault_rates_may_not_add_up_past_one() -> None:
    with pytest.raises(ValueError, match="add up"):
        parse_fault_specs(["error500=0.6", "error429=0.6"])


def test_fault_draw_is_seeded_and_matches_its_rates() -> None:
    config = parse_fault_specs(["error500=0.2", "disconnect=0.3"])
    draws = [config.draw(random.Random(7)) for _ in range(3)]
    assert len(set(draws)) == 1  # same seed, same draw
    rng = random.Random(1)
    counts: dict[str | None, int] = {}
    for _ in range(10_000):
        kind = config.draw(rng)
        counts[kind] = counts.get(kind, 0) + 1
    assert 1_800 < counts["error500"] < 2_200
    assert 2_700 < counts["disconnect"] < 3_300
    assert FaultConfig().draw(rng) is None


def test_fault_args_round_trip() -> None:
    args = fault_args({"malformed": 0.05, "queue503": 4})
    assert args == ["--fault", "malformed=0.05", "--fault", "queue503=4"]
    assert parse_fault_specs(args[1::2]) == FaultConfig(rates=(("malformed", 0.05),), queue503=4)


def test_word_table_is_deterministic_by_seed_and_wraps() -> None:
    a, b, c = WordTable(3), WordTable(3), WordTable(4)
    assert a.text(100, 50) == b.text(100, 50)
    assert a.text(100, 50) != c.text(100, 50)
    text = a.text(8190, 10, first=True)
    assert not text.startswith(" ")
    assert text == (a.text(8190, 2) + a.text(0, 8)).lstrip(" ")
    assert a.text(0, 20_000).count(" ") > 15_000  # one token ~ one short word with a leading space
