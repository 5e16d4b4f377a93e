"""Compare runs: sessions or results files, levels matched by load, each difference judged against the noise
between runs.

A run's figures are its results document's levels (a session's is rebuilt by replaying it to its end, so a
cut session compares up to its cut). A side may be several runs of the same command (repeats): its figure
is their mean. The noise is a bootstrap (`tui.engine.aggregate.run_noise`) over time blocks of each level's
steady window (`block_seconds`), and over the runs where a side has several: for latencies, the percentile
of the requests (or gaps) of the drawn blocks; for throughputs, the mean of the blocks' rates. A difference
is `better` or `worse` only when its 95 % interval lies wholly beyond ±`THRESHOLD_PCT` (criterion.rs's rule),
so a change too small to matter is never a verdict. A p99 is judged only between repeated runs (`TAIL_RUNS`
a side), from `bounded_from` samples a side, and only where its difference exceeds both clients' timing
error (their event-loop lag p99s added): a tail is where a busy machine's stalls land, and one run cannot
show how much its tail moves from run to run (identical runs here: ITL p99 -66 % to +170 %). A results
file carries no per-request samples: its differences are shown, unjudged, with the reason. Where both sides
saved a capacity at SLO (`Results.capacity_at_slo`), each pair carries both sides'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.engine.aggregate.run_noise import CONFIDENCE, ROUNDS, Side, bounded_from, change_interval, verdict
from tui.engine.recording.file import SessionError, read_session
from tui.engine.sessions.samples import BLOCK_S, MIN_BLOCKS, Blocks, LevelSamples, objectives

THRESHOLD_PCT = 10.0
"""The smallest change that is a verdict. Identical runs on this shared 2-core machine (the same bench twice
against the same simulator, `tests/perf/compare_identical_runs.py`) differed by up to 10 % in tok/s and 8 %
in TTFT p50, inside their runs' own noise only now and then; a change worth acting on is larger. On a quiet
machine ``--threshold`` can be lower (criterion.rs uses 2 % for microbenchmarks)."""

METRICS: tuple[tuple[str, str, str, bool], ...] = (
    # (name, results key, sample, higher is better)
    ("output tok/s", "output_throughput", "tok_rate", True),
    ("req/s", "request_throughput", "req_rate", True),
    ("TTFT p50 ms", "p50_ttft_ms", "ttft", False),
    ("TTFT p99 ms", "p99_ttft_ms", "ttft", False),
    ("TPOT p50 ms", "p50_tpot_ms", "tpot", False),
    ("TPOT p99 ms", "p99_tpot_ms", "tpot", False),
    ("ITL p50 ms", "p50_itl_ms", "itl", False),
    ("ITL p99 ms", "p99_itl_ms", "itl", False),
)
"""What is compared per level; ITL is vLLM's chunk gap."""
JUDGED_BLOCKS = 4
"""A level with fewer blocks (`tui.engine.sessions.samples.block_seconds`) is not judged."""
TAIL_RUNS = 2
SERVER = (("running", "running_mean"), ("waiting", "waiting_mean"), ("KV", "kv_usage_mean"))


@dataclass
class Run:
    """One run: its results document and, for a session, its per-level samples by time block."""

    path: Path
    doc: dict[str, Any]
    samples: dict[int, dict[str, Blocks]] = field(default_factory=dict)
    """Per level id, per sample (ttft, tpot, itl in ms; tok_rate, req_rate per s): one array per block."""
    cut: bool = False
    is_session: bool = True

    @property
    def name(self) -> str:
        return self.path.name

    def levels(self) -> list[dict[str, Any]]:
        return list(self.doc.get("levels", []))


def load_key(level: dict[str, Any]) -> tuple[str, float]:
    """How levels are matched: the mode and its value (users, or req/s)."""
    if level.get("mode") == "rate":
        return ("rate", float(level.get("request_rate", 0.0)))
    return ("concurrency", float(level.get("concurrency", 0)))


def load_run(path: Path, *, samples: bool = True) -> Run:
    """A session (replayed to its end) or a results JSON; `SessionError` names the file and the fault.
    ``samples``: also gather a session's per-request samples (for judging noise)."""
    path = Path(path)
    try:
        head = path.open("rb").read(2)
    except OSError as exc:
        raise SessionError(f"{path}: cannot read: {exc.strerror or exc}") from None
    from tui.engine.results.files import ResultsFileError, read_results, to_json

    if head[:1] == b"{":
        try:
            return Run(path, to_json(read_results(path)), is_session=False)
        except ResultsFileError as exc:
            raise SessionError(str(exc)) from None
    from tui.engine.host.playback_engine import PlaybackEngine

    session = read_session(path)
    replay = PlaybackEngine(session).run_to_end()
    doc = to_json(replay.results(interrupted="cut short" if session.cut else None))
    return Run(path, doc, session_samples(replay, doc) if samples else {}, cut=session.cut)


def session_samples(replay: Any, doc: dict[str, Any]) -> dict[int, dict[str, Blocks]]:
    """Each level's samples over its steady window, by time block (`LevelSamples.blocks`; with an SLO, its
    goodput's too), from the session's records."""
    t0 = replay.config.t0_ns
    windows = {
        int(lv["level_id"]): (t0 + lv["window_from_s"] * 1e9, t0 + lv["window_to_s"] * 1e9)
        for lv in doc.get("levels", [])
        if lv.get("window_from_s") is not None and lv.get("window_to_s") is not None
    }
    kept = {level_id: LevelSamples() for level_id in windows}
    decode = replay.config.decoder
    for e in replay.session.events:
        if e.get("k") != "b":
            continue
        for rec in decode._build("Batch", e["b"]).records:
            if (samples := kept.get(rec.level_id)) is not None:
                samples.add(rec)
    slo = objectives(doc)
    return {level_id: samples.blocks(*windows[level_id], slo) for level_id, samples in kept.items()}


@dataclass(frozen=True)
class Difference:
    metric: str
    base: float | None
    other: float | None
    percent: float | None
    verdict: str
    """"better", "worse", "within noise", or "unjudged" (``reason`` says why)."""
    interval: tuple[float, float] | None = None
    """The change's 95 % interval in percent."""
    reason: str = ""


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None


def _mean(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return None if len(got) != len(values) or not got else sum(got) / len(got)


class Group:
    """One side of a comparison: a run, or repeats of one command (their figures averaged)."""

    def __init__(self, runs: Sequence[Run]) -> None:
        self.runs = list(runs)

    @property
    def name(self) -> str:
        return "+".join(r.name for r in self.runs)

    @property
    def doc(self) -> dict[str, Any]:
        return self.runs[0].doc

    def levels(self) -> dict[tuple[str, float], list[dict[str, Any]]]:
        """Per load present in every run: each run's level."""
        per_run = [{load_key(lv): lv for lv in r.levels()} for r in self.runs]
        return {k: [m[k] for m in per_run] for k in per_run[0] if all(k in m for m in per_run)}

    def side(self, levels: list[dict[str, Any]], sample: str) -> tuple[Side | None, str]:
        """The noise samples of these levels (one per run), or None and why not."""
        for run in self.runs:
            if not run.is_session:
                return (
                    None,
                    f"{run.name} is a results file: it holds no per-request samples (give its session)",
                )
        pairs = zip(self.runs, levels, strict=True)
        runs = [r.samples.get(int(lv["level_id"]), {}).get(sample, []) for r, lv in pairs]
        if any(len(b) < JUDGED_BLOCKS for b in runs):
            return None, f"a steady window shorter than {JUDGED_BLOCKS} blocks"
        return Side(runs), ""


def figure(level: dict[str, Any], result_key: str) -> float | None:
    """A level's figure by its results key; ``slo.output_goodput`` reads the key inside ``slo``."""
    section, _, name = result_key.rpartition(".")
    return _num((level.get(section) or {}).get(name) if section else level.get(name))


def judge(base: Group, other: Group, levels: tuple[list[dict[str, Any]], list[dict[str, Any]]],
           metric: tuple[str, str, str, bool], threshold_pct: float) -> Difference:  # fmt: skip
    name, result_key, sample, higher_better = metric
    x = _mean([figure(lv, result_key) for lv in levels[0]])
    y = _mean([figure(lv, result_key) for lv in levels[1]])
    pct = None if x is None or y is None or x == 0 else (y - x) / x * 100
    (sa, why_a), (sb, why_b) = base.side(levels[0], sample), other.side(levels[1], sample)
    if sa is None or sb is None:
        return Difference(name, x, y, pct, "unjudged", reason=why_a or why_b)
    stat = "mean" if sample.endswith("_rate") else result_key.split("_")[0]
    if stat == "p99" and min(len(base.runs), len(other.runs)) < TAIL_RUNS:
        why = f"a p99 moves between identical runs more than one run shows: give {TAIL_RUNS}+ runs a side"
        return Difference(name, x, y, pct, "unjudged", reason=why)
    need = 1 if stat == "mean" else bounded_from(float(stat[1:]))
    if min(len(sa.values), len(sb.values)) < need:
        got = min(len(sa.values), len(sb.values))
        return Difference(name, x, y, pct, "unjudged", reason=f"a {stat} needs {need} samples to be bounded "
                          f"(a side has {got})")  # fmt: skip
    interval = change_interval(sa, sb, stat)
    if interval is None:
        return Difference(name, x, y, pct, "unjudged", reason="no samples in a window")
    judged = verdict(interval, threshold_pct, higher_better)
    timing = _lag_ms(levels[0]) + _lag_ms(levels[1])
    if (
        stat == "p99"
        and judged != "within noise"
        and x is not None
        and y is not None
        and abs(y - x) <= timing
    ):
        why = f"within the clients' timing error (event-loop lag p99 {timing:.1f} ms together)"
        return Difference(name, x, y, pct, "within noise", interval, why)
    return Difference(name, x, y, pct, judged, interval)


def _lag_ms(levels: list[dict[str, Any]]) -> float:
    """The worst event-loop lag p99 a side's client had in these levels: how late a stamp could be."""
    return max(
        (_num((lv.get("client") or {}).get("max_loop_lag_p99_ms")) or 0.0 for lv in levels), default=0.0
    )


def compare_levels(base: Group, other: Group, threshold_pct: float = THRESHOLD_PCT) -> list[dict[str, Any]]:
    """Per load present in both: each metric's difference of ``other`` from ``base``."""
    mine = base.levels()
    rows = []
    for key, theirs in other.levels().items():
        ref = mine.get(key)
        if ref is None:
            continue
        diffs = [judge(base, other, (ref, theirs), metric, threshold_pct) for metric in METRICS]
        for name, server_key in SERVER:
            x = _mean([_num((lv.get("server") or {}).get(server_key)) for lv in ref])
            y = _mean([_num((lv.get("server") or {}).get(server_key)) for lv in theirs])
            pct = None if x is None or y is None or x == 0 else (y - x) / x * 100
            diffs.append(Difference(f"server {name}", x, y, pct, "unjudged", reason="server gauges"))
        errors = (sum(int(lv.get("failed", 0)) for lv in ref), sum(int(lv.get("failed", 0)) for lv in theirs))
        rows.append({"load": key, "level_ids": (ref[0]["level_id"], theirs[0]["level_id"]), "errors": errors,
                     "differences": diffs})  # fmt: skip
    return rows


def knee_of(run: Run) -> float | None:
    knee = (run.doc.get("saturation") or {}).get("knee")
    return None if knee is None else _num(knee.get("value"))


def mismatches(groups: Sequence[Group]) -> list[str]:
    """What differs between the runs' setups (model, ISL, OSL, endpoint): compared only with a warning."""
    out = []
    runs = [r for g in groups for r in g.runs]
    first = runs[0].doc
    for run in runs[1:]:
        for what, section, key in (
            ("model", "target", "model"),
            ("endpoint", "target", "endpoint"),
            ("ISL", "config", "isl"),
            ("OSL", "config", "osl"),
        ):
            a = (first.get(section) or {}).get(key)
            b = (run.doc.get(section) or {}).get(key)
            if a != b:
                out.append(f"{what} differs: {runs[0].name} has {a!r}, {run.name} has {b!r}")
    return out


def _load_name(key: tuple[str, float]) -> str:
    return f"r={key[1]:g}/s" if key[0] == "rate" else f"c={key[1]:g}"


def _cache_state(levels: list[dict[str, Any]]) -> tuple[bool, str]:
    """Whether a side's runs of one load ran from a warm prefix cache (any did), and the evidence."""
    warm = [lv for lv in levels if lv.get("warm_cache")]
    lv = (warm or levels)[0]
    rate, cached = _num(lv.get("prefix_cache_hit_rate")), lv.get("cached_prompt_tokens")
    reset = lv.get("cache_reset") or {}
    said = [] if rate is None else [f"prefix cache hit rate {rate:.0%}"]
    said += [f"{cached:,} cached prompt tokens"] if isinstance(cached, int) and cached else []
    said += ["its cache dropped before it"] if reset.get("done") else []
    said += ["a cache reset refused"] if reset.get("refused") else []
    return bool(warm), ", ".join(said) or "no cached tokens reported"


def _cache_mismatch(base: Group, other: Group) -> list[str]:
    """Loads where one side ran from a warm prefix cache (`Level.warm_cache`) and the other did not: a warm
    cache changes TTFT by tens of times and throughput by twice, so those differences are the cache's."""
    mine = base.levels()
    out = []
    for key, theirs in other.levels().items():
        if (ref := mine.get(key)) is None:
            continue
        (a_warm, a_why), (b_warm, b_why) = _cache_state(ref), _cache_state(theirs)
        if a_warm == b_warm:
            continue
        sides = [(base, a_why), (other, b_why)]
        (warm, warm_why), (cold, cold_why) = sides if a_warm else sides[::-1]
        out.append(
            f"{_load_name(key)}: {warm.name} ran from a warm prefix cache ({warm_why}), {cold.name} cold "
            f"({cold_why}): TTFT and throughput differ by the cache, not the server"
        )
    return out


SLO_KEYS = (("TTFT", "slo_ttft_ms"), ("TPOT", "slo_tpot_ms"), ("E2E", "slo_e2e_ms"), ("target", "slo_target"))


def capacities(group: Group) -> list[dict[str, Any]] | None:
    """Each run's capacity at SLO as its results saved it (``capacity_at_slo``), or None where a run has
    none (no SLO, or a file written before it was saved)."""
    caps = [r.doc.get("capacity_at_slo") for r in group.runs]
    return [c for c in caps if isinstance(c, dict)] if all(isinstance(c, dict) for c in caps) else None


def _capacity_pair(base: Group, other: Group) -> dict[str, Any] | None:
    """Both sides' capacities at SLO (each run's), where both have them; under different SLOs only with a
    warning (`_slo_mismatch`)."""
    a, b = capacities(base), capacities(other)
    return None if a is None or b is None else {"base": a, "other": b}


def _slo_mismatch(base: Group, other: Group) -> list[str]:
    """Where two sides' capacities at SLO were met under different objectives (or targets)."""
    if _capacity_pair(base, other) is None:
        return []
    x, y = base.runs[0], other.runs[0]
    out = []
    for what, key in SLO_KEYS:
        a, b = (x.doc.get("config") or {}).get(key), (y.doc.get("config") or {}).get(key)
        if a != b:
            out.append(f"SLO {what} differs: {x.name} has {a!r}, {y.name} has {b!r} (capacity at SLO)")
    return out


def comparison(
    sides: Sequence[Path | Sequence[Path]], threshold_pct: float = THRESHOLD_PCT
) -> dict[str, Any]:
    """The whole comparison of the first side with each other, as plain data (``--json`` prints it). A side
    is a run's path, or several paths: repeats of one command."""
    groups = [Group([load_run(p) for p in ([s] if isinstance(s, Path | str) else s)]) for s in sides]
    return {
        "runs": [
            {
                "path": str(r.path),
                "knee": knee_of(r),
                "cut": r.cut,
                "model": (r.doc.get("target") or {}).get("model"),
            }
            for g in groups
            for r in g.runs
        ],
        "warnings": mismatches(groups)
        + [w for g in groups[1:] for w in _slo_mismatch(groups[0], g) + _cache_mismatch(groups[0], g)],
        "noise": f"{CONFIDENCE:.0%} interval of the change ({ROUNDS}-round bootstrap over time blocks of "
        f"each window, {BLOCK_S:g} s or {MIN_BLOCKS} a window, and over a side's repeats); a verdict only "
        f"beyond ±{threshold_pct:g} %",
        "threshold_pct": threshold_pct,
        "pairs": [
            {
                "base": groups[0].name,
                "other": g.name,
                "capacity": _capacity_pair(groups[0], g),
                "levels": compare_levels(groups[0], g, threshold_pct),
            }
            for g in groups[1:]
        ],
        "curves": [
            {
                "path": g.name,
                "points": sorted(
                    (
                        (key[1], _mean([_num(lv.get("output_throughput")) for lv in lvs]))
                        for key, lvs in g.levels().items()
                    ),
                    key=lambda point: point[0],
                ),
            }
            for g in groups
        ],
    }
