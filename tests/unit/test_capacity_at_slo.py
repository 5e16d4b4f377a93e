"""The capacity at SLO saved for every run with an SLO (`Results.capacity_at_slo`, the rule of bench's
"capacity at SLO" line), read back, absent from older files, and set side by side by `tokentop compare`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tests.support import frozen
from tests.unit.results_data import frozen_info, frozen_results
from tui.bench.table import capacity_line
from tui.cli.sessions import format_comparison
from tui.engine.config import EngineOptions
from tui.engine.results.capacity import CapacityAtSlo
from tui.engine.results.files import parse_document, read_results, to_json, write_results
from tui.engine.results.model import Results
from tui.engine.sessions.compare import comparison
from tui.engine.snapshot import LevelView, SloView


def _with_slo(lows: tuple[float, ...], target: float = 0.9, slo: bool = True) -> Results:
    """The frozen run (1, 2, 4, 8 users), each level's attainment lower bound as given."""
    snap = frozen.snapshot()
    levels = _views(lows)
    options = EngineOptions(slo_ttft_ms=500.0 if slo else None, slo_target=target)
    return frozen_results(info=frozen_info(options=options), snap=replace(snap, levels=levels))


def _views(lows: tuple[float, ...]) -> tuple[LevelView, ...]:
    """The frozen levels (1, 2, 4, 8 users), each met by 90 % with the attainment lower bound given."""
    return tuple(
        replace(
            lv,
            slo=SloView(
                met=9,
                requests=10,
                cut=0,
                attainment=0.9,
                low=low,
                high=1.0,
                goodput_rps=2.0,
                goodput_tps=lv.output_tps * 0.9,
            ),
        )
        for lv, low in zip(frozen.snapshot().levels, lows, strict=True)
    )


def test_the_capacity_is_saved_by_the_rule_bench_says_it_by_and_reads_back() -> None:
    doc = _with_slo((0.95, 0.92, 0.8, 0.93))  # 8 users met 0.9 again after 4 missed it: the highest load
    cap = doc.capacity_at_slo
    top = doc.levels[3]
    assert top.slo is not None
    assert cap == CapacityAtSlo(level_id=top.level_id, mode="concurrency", value=8.0,
                                output_goodput=top.slo.output_goodput, request_goodput=2.0)  # fmt: skip
    line = capacity_line(_views((0.95, 0.92, 0.8, 0.93)), 0.9)
    assert line is not None and line.startswith("capacity at SLO: 8 users")
    assert parse_document(to_json(doc)) == doc
    none = _with_slo((0.5, 0.5, 0.5, 0.5))
    assert none.capacity_at_slo == CapacityAtSlo(level_id=None)
    assert to_json(none)["capacity_at_slo"] == {"level_id": None}
    assert "capacity_at_slo" not in to_json(_with_slo((0.95,) * 4, slo=False))


def test_a_file_written_before_the_capacity_was_saved_still_reads(tmp_path: Path) -> None:
    doc = to_json(_with_slo((0.95, 0.92, 0.8, 0.5)))
    del doc["capacity_at_slo"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    read = read_results(path)
    assert isinstance(read, Results) and read.capacity_at_slo is None


A, B = (0.95, 0.92, 0.8, 0.5), (0.95, 0.92, 0.91, 0.5)
"""Attainment lower bounds by level: A meets 0.9 up to 2 users, B up to 4."""


def _goodput(lows: tuple[float, ...]) -> str:
    cap = _with_slo(lows).capacity_at_slo
    assert cap is not None and cap.output_goodput is not None
    return f"{cap.output_goodput:,.0f} tok/s"


def test_compare_says_both_sides_capacity_at_slo_where_both_saved_it(tmp_path: Path) -> None:
    a = write_results(_with_slo(A), tmp_path / "a.json")
    b = write_results(_with_slo(B), tmp_path / "b.json")
    none = write_results(_with_slo((0.5,) * 4), tmp_path / "none.json")
    old = tmp_path / "old.json"
    doc = json.loads(b.read_text())
    del doc["capacity_at_slo"]
    old.write_text(json.dumps(doc))
    data = comparison([a, b, none, old])
    assert [p["capacity"] is None for p in data["pairs"]] == [False, False, True]  # an older file: no line
    text = format_comparison(data, markdown=False).splitlines()
    assert f"capacity at SLO: a.json serves 2 users ({_goodput(A)}), b.json 4 users ({_goodput(B)})" in text
    assert f"capacity at SLO: a.json serves 2 users ({_goodput(A)}), none.json none of its levels" in text
    assert sum(line.startswith("capacity at SLO") for line in text) == 2
    # a side of repeats: the range of its runs' loads, their mean goodput
    cap_a, cap_b = _with_slo(A).capacity_at_slo, _with_slo(B).capacity_at_slo
    assert cap_a is not None and cap_b is not None and cap_a.output_goodput and cap_b.output_goodput
    mean = (cap_a.output_goodput + cap_b.output_goodput) / 2
    joined = format_comparison(comparison([[a, b], [b]]), markdown=False)
    assert f"a.json+b.json serves 2 users to 4 users ({mean:,.0f} tok/s), b.json 4 users" in joined
    # capacities met under different SLOs are set side by side only with a warning
    doc = _with_slo(B)
    strict = write_results(
        replace(doc, config=replace(doc.config, slo_ttft_ms=250.0)), tmp_path / "strict.json"
    )
    assert any(w.startswith("SLO TTFT differs") for w in comparison([a, strict])["warnings"])
    assert not any(w.startswith("SLO") for w in comparison([a, b])["warnings"])
