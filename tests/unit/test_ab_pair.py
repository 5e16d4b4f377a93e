"""The live A/B's pure parts: a level's samples by time block, A's levels paired with B's, B's files beside
A's, and the level table's A/B cell."""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from rich.style import Style

from tests.support import frozen
from tests.support.fake_engine import FakeEngine
from tui.app.widgets.level_table import ab_cell
from tui.app.widgets.status import UiState, status_lines
from tui.engine.ab import pair as pair_module
from tui.engine.ab.pair import b_file, b_session, paired
from tui.engine.ab.turns import Turns, side_of
from tui.engine.config import LoadTarget
from tui.engine.records import RequestRecord
from tui.engine.results.ab import AbDifference, AbLevel
from tui.engine.sessions.samples import LevelSamples

MS = 1_000_000


def _record(rid: int, sent_ms: int, gaps_ms: list[int], *, status: str = "ok") -> RequestRecord:
    """A request sent at ``sent_ms`` whose chunks land ``gaps_ms`` apart, the first 10 ms after it."""
    chunks = np.cumsum([10, *gaps_ms]) + sent_ms
    return RequestRecord(request_id=rid, worker=0, seq=rid, level_id=1, sent_ns=sent_ms * MS,
                         first_content_ns=int(chunks[0]) * MS, end_ns=int(chunks[-1]) * MS,
                         chunk_ns=array("q", (int(c) * MS for c in chunks)), status=status)  # type: ignore[arg-type]  # fmt: skip


def test_samples_fall_in_the_block_of_their_send_or_their_chunk_and_follow_a_moving_window() -> None:
    samples = LevelSamples()
    samples.add(_record(1, 0, [5, 5, 5]))  # chunks at 10, 15, 20, 25 ms; TTFT 10, TPOT 5
    samples.add(_record(2, 300, [20, 20]))  # chunks at 310, 330, 350 ms; TTFT 10, TPOT 20
    samples.add(_record(3, 100, [1], status="error"))  # a failed request is no sample
    blocks = samples.blocks(0, 2_000 * MS)  # a 2 s window: 8 blocks of 0.25 s
    assert len(blocks["ttft"]) == 8 and samples.stamps == 7
    assert blocks["ttft"][0].tolist() == [10.0] and blocks["ttft"][1].tolist() == [10.0]
    assert blocks["tpot"][0].tolist() == [5.0] and blocks["tpot"][1].tolist() == [20.0]
    assert blocks["itl"][0].tolist() == [5.0] * 3 and blocks["itl"][1].tolist() == [20.0] * 2
    assert [b[0] for b in blocks["tok_rate"][:3]] == [16.0, 12.0, 0.0]  # 4 and 3 chunks a quarter second
    assert [b[0] for b in blocks["req_rate"][:2]] == [4.0, 4.0]
    assert "good_tok_rate" not in blocks  # no SLO: no goodput
    met = samples.blocks(0, 2_000 * MS, (None, 10.0, None))["good_tok_rate"]  # TPOT 10 ms: the first met it
    assert [b[0] for b in met[:2]] == [16.0, 0.0] and len(met) == 8  # its 4 tokens, ended in the first block
    timely = samples.blocks(0, 2_000 * MS, (None, None, 30.0))["good_tok_rate"]  # E2E 30 ms: the first's 25
    assert [b[0] for b in timely[:2]] == [16.0, 0.0]
    later = samples.blocks(250 * MS, 2_250 * MS)  # the window moved on: the first request is outside it
    assert later["ttft"][0].tolist() == [10.0] and sum(len(b) for b in later["ttft"]) == 1


def _level(level_id: int, users: int) -> dict[str, object]:
    return {"level_id": level_id, "mode": "concurrency", "concurrency": users}


def test_a_level_pairs_with_bs_level_of_the_same_load_visited_as_often() -> None:
    a = [_level(1, 2), _level(2, 4), _level(3, 2), _level(4, 8)]
    b = [_level(1, 2), _level(2, 4), _level(3, 4), _level(4, 2)]
    ids = [(x["level_id"], y["level_id"]) for x, y in paired(a, b)]
    assert ids == [(1, 1), (2, 2), (3, 4)]  # 8 users: not (yet) on B


def test_bs_files_sit_beside_as() -> None:
    assert b_file(Path("/x/requests.jsonl")) == Path("/x/requests-b.jsonl")
    assert b_session(Path("/x/run.tokentop-session.gz")) == Path("/x/run-b.tokentop-session.gz")
    assert b_session(Path("/x/run.gz")) == Path("/x/run-b.tokentop-session.gz")


def test_the_tables_ab_cell_says_bs_figure_its_change_and_the_verdict() -> None:
    level = AbLevel(mode="concurrency", value=2, a_level_id=1, b_level_id=1, differences=(
        AbDifference(metric="output tok/s", a=380.4, b=192.5, change_pct=-49.4, verdict="worse"),
        AbDifference(metric="SLO attainment", a=0.99, b=0.5, change_pct=-49.5, verdict="worse"),
        AbDifference(metric="TTFT p50 ms", a=9.8, b=None, change_pct=None, verdict="unjudged"),
    ))  # fmt: skip
    assert ab_cell(level, "output tok/s") == "192.5 -49% worse"
    assert ab_cell(level, "SLO attainment") == "50% -50% worse"
    assert ab_cell(level, "output goodput") == "-"  # not judged at this level
    assert ab_cell(level, "TTFT p50 ms") == "- unjudged"
    assert ab_cell(level, "ITL p50 ms") == ab_cell(None, "output tok/s") == "-"


def test_a_level_stops_keeping_samples_at_the_cap_and_says_it_is_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pair_module, "MAX_STAMPS", 6)
    pair = pair_module.AbPair(FakeEngine(), FakeEngine())  # type: ignore[arg-type]  # a fake: no run
    pair._keep(0, [_record(1, 0, [5, 5, 5]), _record(2, 300, [20, 20]), _record(3, 600, [1])])
    assert pair._samples[0][1].stamps == 7  # 4, then 3 more while under the cap; the third request no more
    assert pair._full((1, 1)) and not pair._full((2, 2))


def test_the_status_bar_names_both_endpoints_and_the_side_on_turn() -> None:
    snap = frozen.snapshot(demo=False)
    ui = UiState(target=snap.load, b_where=("http://b:9000/v1", "m-b"), turn="B")
    where, load, _ = ("".join(text for text, _ in line) for line in status_lines(snap, ui, lambda _: Style()))
    assert (
        where.startswith("A http://127.0.0.1:8000/v1 · sim-llama-8b") and "B http://b:9000/v1 · m-b" in where
    )
    assert "▶ running on B" in load
    alone = "".join(text for text, _ in status_lines(snap, UiState(target=snap.load), lambda _: Style())[0])
    assert alone.startswith("http://127.0.0.1:8000/v1") and "B " not in alone


class _Door:
    """A side as `Turns` sees it: its load (each change logged, in one shared order) and what is in flight."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log, self.in_flight = name, log, 0
        self.load = LoadTarget(concurrency=2)

    def set_load(self, load: LoadTarget) -> None:
        self.load = load
        self.log.append(f"{self.name} paused" if load.paused else f"{self.name} {load.concurrency}")

    def snapshot(self) -> SimpleNamespace:
        return SimpleNamespace(in_flight=self.in_flight)

    def wait_ready(self, timeout_s: float) -> bool:
        return True


def _until(pred: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_turns_go_a_b_b_a_under_the_keys_each_after_the_last_side_rests() -> None:
    assert [side_of(k) for k in range(8)] == [0, 1, 1, 0, 0, 1, 1, 0]
    log: list[str] = []
    a, b = _Door("A", log), _Door("B", log)
    now = [0.0]
    turns = Turns((a, b), block_s=1.0, clock=lambda: now[0])  # type: ignore[arg-type]  # all it reads
    assert log == ["B paused"] and turns.on == "A"  # B waits for its turn

    def next_turn(entry: str, count: int) -> None:
        now[0] += 1.0
        _until(lambda: log.count(entry) == count, f"{entry} ({count})")

    a.in_flight = 1  # A's last answer still streams when its turn ends: B's turn waits for it
    turns.start()
    try:
        now[0] += 1.0
        _until(lambda: log[-1] == "A paused", "A's turn to end")
        time.sleep(0.2)  # the turner polls every 50 ms: B would have started by now
        assert log[-1] == "A paused" and turns.on == ""
        a.in_flight = 0
        _until(lambda: log[-1] == "B 2", "B's turn")
        next_turn("B 2", 2)  # B again: A B B A
        turns.set_load(LoadTarget(concurrency=5))  # a key: the side on turn takes it now, A later
        assert log[-1] == "B 5" and a.load.paused
        next_turn("A 5", 1)
        next_turn("A 5", 2)
        next_turn("B 5", 2)
    finally:
        turns.stop()
    assert log == ["B paused", "A paused", "B 2", "B paused", "B 2", "B 5", "B paused", "A 5", "A paused",
                   "A 5", "A paused", "B 5"]  # fmt: skip
