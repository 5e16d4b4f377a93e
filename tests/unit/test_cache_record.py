"""The results record, per level, whether a warm prefix cache served it (`Level.warm_cache`, beside its hit
rate and cached tokens) and the cache reset asked for before it (`Level.cache_reset`); `tokentop compare`
warns where one side ran warm and the other did not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson

from tests.support import frozen
from tests.unit.results_data import frozen_info
from tui.engine.results.build import ClientSummary, LevelExtras, build_results
from tui.engine.results.files import read_results, to_json, write_results
from tui.engine.results.model import CacheReset, Results
from tui.engine.sessions.compare import comparison

DROPPED = CacheReset(at_s=12.5, done=True, line="prefix cache dropped (POST /reset_prefix_cache)")
REFUSED = CacheReset(at_s=30.0, done=False, refused=True, line="the server refused to drop its prefix cache")


def _results(*, warm: frozenset[int] = frozenset(), resets: dict[int, CacheReset] | None = None) -> Results:
    snap = frozen.snapshot()
    levels = tuple(
        replace(lv, warm_cache=lv.level_id in warm, cache_hit_rate=0.93 if lv.level_id in warm else 0.0,
                cached_tokens=4_096 if lv.level_id in warm else 0)
        for lv in snap.levels
    )  # fmt: skip
    views = [(lv, LevelExtras()) for lv in levels]
    client = ClientSummary(1.0, 0.2, saturated=False)
    return build_results(frozen_info(), replace(snap, levels=levels), views, client, resets=resets)


def test_a_warm_level_and_the_resets_are_written_and_read_back(tmp_path: Path) -> None:
    doc = _results(warm=frozenset({2}), resets={2: DROPPED, 3: REFUSED})
    data = to_json(doc)
    by_id = {lv["level_id"]: lv for lv in data["levels"]}
    assert [by_id[i]["warm_cache"] for i in (1, 2, 3)] == [False, True, False]
    assert by_id[2]["prefix_cache_hit_rate"] == 0.93 and by_id[2]["cached_prompt_tokens"] == 4_096
    assert "cache_reset" not in by_id[1]  # none asked for: no key
    assert by_id[2]["cache_reset"] == {"at_s": 12.5, "done": True, "refused": False, "line": DROPPED.line}
    assert by_id[3]["cache_reset"]["refused"] is True and by_id[3]["cache_reset"]["done"] is False
    read = read_results(write_results(doc, tmp_path / "r.json"))
    assert read == doc
    assert {lv.level_id: lv.cache_reset for lv in read.levels if lv.cache_reset} == {2: DROPPED, 3: REFUSED}


def test_a_file_from_before_reads_as_neither_warm_nor_reset(tmp_path: Path) -> None:
    data = to_json(_results(warm=frozenset({2}), resets={2: DROPPED}))
    for level in data["levels"]:
        level.pop("warm_cache")
        level.pop("cache_reset", None)
    path = tmp_path / "old.json"
    path.write_bytes(orjson.dumps(data))
    assert all(not lv.warm_cache and lv.cache_reset is None for lv in read_results(path).levels)


def test_compare_warns_where_one_side_ran_warm_and_the_other_cold(tmp_path: Path) -> None:
    cold = write_results(_results(resets={2: DROPPED}), tmp_path / "cold.json")
    warm = write_results(_results(warm=frozenset({2})), tmp_path / "warm.json")
    same = write_results(_results(), tmp_path / "same.json")
    warned = [w for w in comparison([cold, warm])["warnings"] if "warm prefix cache" in w]
    assert len(warned) == 1, warned  # level 2 only: the other loads ran alike
    (line,) = warned
    assert line.startswith("c=") and "warm.json ran from a warm prefix cache" in line
    assert "hit rate 93%" in line and "4,096 cached prompt tokens" in line
    assert "cold.json cold (prefix cache hit rate 0%, its cache dropped before it)" in line
    assert [w for w in comparison([warm, cold])["warnings"] if "warm prefix cache" in w] == warned
    assert not [w for w in comparison([cold, same])["warnings"] if "warm" in w]
