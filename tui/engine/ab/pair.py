"""`AbPair`: two engines, A and B, under one steered load, judged level by level as the run goes.

An `Engine` to its face: a load command goes to both sides (in turns, to the side on turn:
`tui.engine.ab.turns`), a read is A's, and `ab_view` adds B's snapshot, B's server and the verdicts. Each side
is a whole engine of its own, so each side's figures are what a run against it alone reports. The verdicts are
`tokentop compare`'s (`tui.engine.sessions.ab.judge_live`), from each side's results and the samples its
records left (`tui.engine.sessions.samples`), kept here as they arrive: judging by replaying the sessions took
3.5 CPU-s for 20 s of 8 users, and grows with the run.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.engine.ab.turns import Turns
from tui.engine.api import Engine
from tui.engine.config import EngineOptions, LoadTarget, WorkloadConfig
from tui.engine.recording.file import SUFFIX
from tui.engine.records import RequestRecord
from tui.engine.results.ab import AbCapacity, AbLevel
from tui.engine.results.files import to_json
from tui.engine.results.model import Ab, Results
from tui.engine.sessions.ab import ab_capacity, judge_live, judge_live_turns
from tui.engine.sessions.compare import JUDGED_BLOCKS, load_key
from tui.engine.sessions.samples import LevelSamples, Objectives, objectives
from tui.engine.snapshot import RampVerdict, RequestDetail, Snapshot

if TYPE_CHECKING:
    from tui.engine.server_metrics.view import ServerView

JUDGE_EVERY_S = 2.0
"""How often the levels not yet final are judged again (off the face's thread)."""
MAX_STAMPS = 100_000
"""A side's level keeps at most this many chunk stamps; past it, the level's verdict stays as last judged.
The bootstrap weighs every gap in each of its rounds (100 at once: 80 MB for this many), and a level this
long has long since been judged (20 s of 8 users at 200 tok/s each is 32,000)."""
SIDES = ("A", "B")


def b_file(path: Path) -> Path:
    """B's file beside A's: ``requests.jsonl`` -> ``requests-b.jsonl``."""
    return path.with_name(f"{path.stem}-b{path.suffix}")


def b_session(path: Path) -> Path:
    """B's session beside A's: ``run.tokentop-session.gz`` or ``run.gz`` -> ``run-b.tokentop-session.gz``."""
    stem = path.name.removesuffix(SUFFIX) if path.name.endswith(SUFFIX) else path.stem
    return path.with_name(f"{stem}-b{SUFFIX}")


def b_options(options: EngineOptions) -> EngineOptions:
    """B's engine options: A's, B's session recorded beside A's (none when A records none)."""
    return replace(options, record=None if options.record is None else str(b_session(Path(options.record))))


def b_workload(workload: WorkloadConfig, mode: str) -> WorkloadConfig:
    """B's workload: A's; in turns (two doors to one pool) its prompts of their own salt, for B would
    otherwise find A's prompts in the pool's prefix cache."""
    return replace(workload, prompt_salt=f"{workload.prompt_salt}b") if mode == "alternate" else workload


@dataclass(frozen=True)
class AbView:
    """What a face shows of B beside A's snapshot."""

    b: Snapshot
    b_server: ServerView | None
    levels: tuple[AbLevel, ...]
    """Each level both sides ran, as last judged, in A's order."""
    mode: str
    threshold_pct: float
    note: str = ""
    """Why the verdicts stopped, if they did."""
    capacity: AbCapacity | None = None
    """With an SLO: each side's capacity at it, as last judged."""
    turn: str = ""
    """In turns (``alternate``): the side the load is on now, "" while neither."""


def paired(
    a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A's levels each with B's of the same load: the k-th level at a load on A with the k-th on B."""
    by_load: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for lv in b:
        by_load.setdefault(load_key(lv), []).append(lv)
    seen: dict[tuple[str, float], int] = {}
    out = []
    for lv in a:
        key = load_key(lv)
        k = seen[key] = seen.get(key, -1) + 1
        if k < len(by_load.get(key, ())):
            out.append((lv, by_load[key][k]))
    return out


class AbPair:
    """Implements `tui.engine.api.Engine` over two engines (A's reads; both take each command, or with
    ``block_s`` in ``alternate`` the side on turn: `tui.engine.ab.turns`), and judges B against A level by
    level on a thread of its own; in ``alternate`` a side's turns at a load are its repeats."""

    def __init__(self, a: Engine, b: Engine, *, mode: str = "parallel", threshold_pct: float = 10.0,
                 judge_every_s: float = JUDGE_EVERY_S, block_s: float | None = None) -> None:  # fmt: skip
        self.a, self.b = a, b
        self.mode, self.threshold_pct = mode, threshold_pct
        self.turns = Turns((a, b), block_s) if mode == "alternate" and block_s is not None else None
        """The live app's turns; None in parallel, or where the face steers each side (bench's turns)."""
        self._every_s = judge_every_s
        self._lock = threading.Lock()
        """Guards the samples (added on the engines' reader threads) and the verdicts."""
        self._judging = threading.Lock()
        """One judgement at a time (the thread's, or the results' last)."""
        self._samples: tuple[dict[int, LevelSamples], dict[int, LevelSamples]] = ({}, {})
        self._dropped: tuple[set[int], set[int]] = (set(), set())
        """Levels whose verdict is final: their records are no longer kept."""
        self._verdicts: dict[tuple[int, int] | tuple[str, float], AbLevel] = {}
        """By (A's level id, B's), in the order first judged; in turns by load."""
        self._fixed: tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]] = ({}, {})
        """In turns: the samples of each turn that has ended, by time block (its records dropped)."""
        self._used: dict[tuple[str, float], tuple[tuple[int, ...], bool]] = {}
        """In turns: the levels each load's verdict was last judged from, and whether all had ended."""
        self._capacity: AbCapacity | None = None
        """With an SLO: each side's capacity at it, as last judged."""
        for side, engine in enumerate((a, b)):
            listeners = getattr(engine, "record_listeners", None)  # a load engine's (`EngineHandle`)
            if listeners is not None:
                listeners.append(partial(self._keep, side))
        self.note = ""
        """Why the live verdicts stopped, if they did ("" while they go on)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._judge_often, name="tokentop-ab-judge", daemon=True)

    # --- Engine protocol: A's reads, both sides' commands ---------------------------------------

    @property
    def load(self) -> LoadTarget:
        return self.a.load if self.turns is None else self.turns.target

    @property
    def level_id(self) -> int:
        return self.a.level_id

    @property
    def model(self) -> str:
        return self.a.model

    @property
    def fatal(self) -> str | None:
        return self.a.fatal or (None if self.b.fatal is None else f"B: {self.b.fatal}")

    @property
    def t0_ns(self) -> int:
        return self.a.t0_ns

    @property
    def stopped(self) -> bool:
        return self.a.stopped and self.b.stopped

    def start(self) -> None:
        self.a.start()
        self.b.start()
        self._thread.start()
        if self.turns is not None:
            self.turns.start()

    def server_view(self) -> ServerView | None:
        return self.a.server_view()

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        return self.a.wait_ready(timeout_s) and self.b.wait_ready(timeout_s)

    def set_load(self, target: LoadTarget) -> None:
        if self.turns is not None:
            self.turns.set_load(target)
            return
        self.a.set_load(target)
        self.b.set_load(target)

    def record_ramp(self, verdict: RampVerdict) -> None:
        self.a.record_ramp(verdict)
        self.b.record_ramp(verdict)

    def snapshot(self) -> Snapshot:
        """A's snapshot; B's fatal error is the pair's too."""
        snap = self.a.snapshot()
        return snap if snap.fatal or self.b.fatal is None else replace(snap, fatal=self.fatal)

    def detail(self, request_id: int) -> RequestDetail | None:
        return self.a.detail(request_id)

    def results(self, *, interrupted: str | None = None) -> Results:
        """A's results with the ``ab`` section bench writes: B's own document and each level judged."""
        a = self.a.results(interrupted=interrupted)
        b = self.b.results(interrupted=interrupted)
        assert isinstance(a, Results) and isinstance(b, Results)  # load engines', never a watch's
        levels = self.judge(a, b)
        section = Ab(mode=self.mode, threshold_pct=self.threshold_pct, b=b, levels=levels,
                     capacity=ab_capacity(a, b))  # fmt: skip
        return replace(a, ab=section)

    def write_results(self, path: Path, *, interrupted: str | None = None) -> Path:
        from tui.engine.host.run_core import write_results

        return write_results(self.results(interrupted=interrupted), path)

    def stop(self, *, finish_in_flight: bool = False, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self.turns is not None:
            self.turns.stop(timeout_s)
        if self._thread.is_alive():  # a judgement under way ends first: nothing judges a stopped pair
            self._thread.join(timeout_s)
        self.b.stop(finish_in_flight=finish_in_flight, timeout_s=timeout_s)
        self.a.stop(finish_in_flight=finish_in_flight, timeout_s=timeout_s)

    # --- what a load engine has beyond the protocol, on both sides ------------------------------

    @property
    def session_path(self) -> Path | None:
        return getattr(self.a, "session_path", None)

    @property
    def session_lost(self) -> Any:
        return getattr(self.a, "session_lost", None) or getattr(self.b, "session_lost", None)

    def mark(self, label: str) -> None:
        for engine in (self.a, self.b):
            if (mark := getattr(engine, "mark", None)) is not None:
                mark(label)

    def reset_cache(self) -> Any:
        """Each side's server drops its prefix cache; A's outcome is said (B's refusal is B's notice)."""
        outcomes = [reset() for e in (self.a, self.b) if (reset := getattr(e, "reset_cache", None))]
        return outcomes[0]

    # --- B and the verdicts ---------------------------------------------------------------------

    def ab_view(self) -> AbView:
        """B's snapshot and server, and the verdicts as last judged (cheap: the judging is elsewhere)."""
        with self._lock:
            levels = tuple(self._verdicts.values())
        return AbView(self.b.snapshot(), self.b.server_view(), levels, self.mode, self.threshold_pct,
                      self.note, capacity=self._capacity,
                      turn="" if self.turns is None else self.turns.on)  # fmt: skip

    def judge(self, a: Results | None = None, b: Results | None = None) -> tuple[AbLevel, ...]:
        """Judge every level both sides ran whose verdict is not final yet (from ``a`` and ``b``, the
        sides' results, when given); every level's verdict, in A's order."""
        with self._judging:
            a_res, b_res = (d if d is not None else e.results() for d, e in ((a, self.a), (b, self.b)))
            a_doc, b_doc = to_json(a_res), to_json(b_res)
            if isinstance(a_res, Results) and isinstance(b_res, Results):
                self._capacity = ab_capacity(a_res, b_res)
            if self.mode == "alternate":
                return self._judge_turns(a_doc, b_doc)
            t0 = (self.a.t0_ns, self.b.t0_ns)
            for a_lv, b_lv in paired(a_doc.get("levels", []), b_doc.get("levels", [])):
                ids = (int(a_lv["level_id"]), int(b_lv["level_id"]))
                if ids in self._verdicts and (ids[0] in self._dropped[0] or self._full(ids)):
                    continue
                sides = [(lv, self._blocks(side, lv, t0[side], objectives(doc))) for side, (lv, doc) in
                         enumerate(((a_lv, a_doc), (b_lv, b_doc)))]  # fmt: skip
                judged = judge_live(sides[0], sides[1], self.threshold_pct)
                final = (
                    a_lv.get("ended_s") is not None and b_lv.get("ended_s") is not None and self._idle(ids)
                )
                with self._lock:
                    if judged is not None:
                        self._verdicts[ids] = judged
                    if final:
                        for side, level_id in enumerate(ids):
                            self._dropped[side].add(level_id)
                            self._samples[side].pop(level_id, None)
            with self._lock:
                order = [(int(a["level_id"]), int(b["level_id"])) for a, b in
                         paired(a_doc.get("levels", []), b_doc.get("levels", []))]  # fmt: skip
                return tuple(self._verdicts[ids] for ids in order if ids in self._verdicts)

    def _judge_turns(self, a_doc: dict[str, Any], b_doc: dict[str, Any]) -> tuple[AbLevel, ...]:
        """Each load both sides held in turns, judged from every turn with a steady window of
        `JUDGED_BLOCKS` (the first n of each side, n the fewer side's); in the order A first held them."""
        t0 = (self.a.t0_ns, self.b.t0_ns)
        held: tuple[dict[tuple[str, float], list[dict[str, Any]]], ...] = ({}, {})
        for side, doc in enumerate((a_doc, b_doc)):
            for lv in doc.get("levels", []):  # a side's paused start, or a turn cut before a request, is none
                if int(lv.get("level_completed", 0)) + int(lv.get("level_failed", 0)) > 0:
                    held[side].setdefault(load_key(lv), []).append(lv)
        order = [key for key in held[0] if key in held[1]]
        for key in order:
            sides = [[(lv, blocks) for lv in held[side][key] if len(
                (blocks := self._turn_blocks(side, lv, t0[side], objectives(doc))).get("tok_rate", ())
            ) >= JUDGED_BLOCKS] for side, doc in enumerate((a_doc, b_doc))]  # fmt: skip
            n = min(len(turns) for turns in sides)
            used = tuple(int(lv["level_id"]) for turns in sides for lv, _ in turns[:n])
            final = all(
                int(lv["level_id"]) in self._fixed[side] for side in (0, 1) for lv, _ in sides[side][:n]
            )
            if n == 0 or self._used.get(key) == (used, True):  # judged from these, each ended, already
                continue
            judged = judge_live_turns(sides[0][:n], sides[1][:n], self.threshold_pct)
            with self._lock:
                self._used[key] = (used, final)
                if judged is not None:
                    self._verdicts[key] = judged
        with self._lock:
            return tuple(self._verdicts[key] for key in order if key in self._verdicts)

    def _turn_blocks(
        self, side: int, level: dict[str, Any], t0_ns: int, slo: Objectives | None
    ) -> dict[str, Any]:
        """A turn's samples over its steady window, by time block; kept as blocks once the turn has ended
        and nothing of it is in flight (its records are then dropped)."""
        level_id = int(level["level_id"])
        if (fixed := self._fixed[side].get(level_id)) is not None:
            return fixed
        blocks = self._blocks(side, level, t0_ns, slo)
        engine = (self.a, self.b)[side]
        if level.get("ended_s") is not None and not any(
            lane.level_id == level_id and lane.state in ("waiting", "streaming")
            for lane in engine.snapshot().lanes
        ):
            with self._lock:
                self._fixed[side][level_id] = blocks
                self._dropped[side].add(level_id)
                self._samples[side].pop(level_id, None)
        return blocks

    def _blocks(self, side: int, level: dict[str, Any], t0_ns: int, slo: Objectives | None) -> dict[str, Any]:
        """A side's level's samples over its steady window (none before it has one), with ``slo`` its
        goodput's."""
        lo, hi = level.get("window_from_s"), level.get("window_to_s")
        with self._lock:
            samples = self._samples[side].get(int(level["level_id"]))
            if samples is None or lo is None or hi is None:
                return {}
            return samples.blocks(t0_ns + lo * 1e9, t0_ns + hi * 1e9, slo)

    def _full(self, ids: tuple[int, int]) -> bool:
        """A side of these levels keeps no more samples (`MAX_STAMPS`)."""
        with self._lock:
            kept = [self._samples[side].get(level_id) for side, level_id in enumerate(ids)]
        return any(k is not None and k.stamps >= MAX_STAMPS for k in kept)

    def _idle(self, ids: tuple[int, int]) -> bool:
        """No request of these levels is in flight on its side (an answer that ends late still counts)."""
        for engine, level_id in zip((self.a, self.b), ids, strict=True):
            lanes = engine.snapshot().lanes
            if any(lane.level_id == level_id and lane.state in ("waiting", "streaming") for lane in lanes):
                return False
        return True

    def _keep(self, side: int, records: Sequence[RequestRecord]) -> None:
        """A batch's finished records on one side (its reader thread): each a sample of its level."""
        with self._lock:
            kept, dropped = self._samples[side], self._dropped[side]
            for rec in records:
                if rec.level_id in dropped:
                    continue
                samples = kept.setdefault(rec.level_id, LevelSamples())
                if samples.stamps < MAX_STAMPS:
                    samples.add(rec)

    def _judge_often(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.judge()
            except Exception as exc:  # a verdict must never take the run down: say why, stop judging
                self.note = f"judging stopped: {type(exc).__name__}: {exc}"
                return


if TYPE_CHECKING:

    def _implements_engine(pair: AbPair) -> Engine:
        return pair  # mypy checks AbPair against the Engine protocol here
