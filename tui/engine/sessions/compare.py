"""Compare runs: sessions or results files, levels matched by load, each difference judged against noise.

A run's figures are its results document's levels (a session's is rebuilt by replaying it to its end, so a
cut session compares up to its cut). Noise comes from a session's own requests: for latencies, a bootstrap
of the difference of medians (or of p99s) from the per-request samples of each level's steady window; for
throughputs, the same over the rates of short bins of the window (1/20th of it, at least
0.25 s). A difference is beyond noise when the 95 % interval of that
bootstrap excludes zero. A results file carries no per-request samples: its differences are shown, unjudged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tui.engine.recording.file import SessionError, read_session

BOOTSTRAP_ROUNDS = 1000
CONFIDENCE = 0.95
SEED = 12345
"""Fixed, so a comparison prints the same verdicts every time it is run."""

METRICS: tuple[tuple[str, str, str, bool], ...] = (
    # (name, results key, sample, higher is better)
    ("output tok/s", "output_throughput", "tok_bins", True),
    ("req/s", "request_throughput", "req_bins", True),
    ("TTFT p50 ms", "p50_ttft_ms", "ttft", False),
    ("TTFT p99 ms", "p99_ttft_ms", "ttft", False),
    ("TPOT p50 ms", "p50_tpot_ms", "tpot", False),
    ("TPOT p99 ms", "p99_tpot_ms", "tpot", False),
    ("ITL p50 ms", "p50_itl_ms", "itl", False),
    ("ITL p99 ms", "p99_itl_ms", "itl", False),
)
"""What is compared per level; ITL is vLLM's chunk gap."""
BINS = 20
MIN_BIN_S = 0.25
"""Throughput noise: a level's window cut into `BINS` bins of at least `MIN_BIN_S`, each a rate sample."""
SERVER = (("running", "running_mean"), ("waiting", "waiting_mean"), ("KV", "kv_usage_mean"))


@dataclass
class Run:
    """One side of a comparison: its results document and, for a session, its per-level samples."""

    path: Path
    doc: dict[str, Any]
    samples: dict[int, dict[str, npt.NDArray[np.float64]]] = field(default_factory=dict)
    """Per level id: ttft, tpot, itl (ms, per request or per gap), tok_bins, req_bins (per second)."""
    cut: bool = False

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
            return Run(path, to_json(read_results(path)))
        except ResultsFileError as exc:
            raise SessionError(str(exc)) from None
    from tui.engine.host.playback_engine import PlaybackEngine

    session = read_session(path)
    replay = PlaybackEngine(session).run_to_end()
    doc = to_json(replay.results(interrupted="cut short" if session.cut else None))
    return Run(path, doc, session_samples(replay, doc) if samples else {}, cut=session.cut)


def session_samples(replay: Any, doc: dict[str, Any]) -> dict[int, dict[str, npt.NDArray[np.float64]]]:
    """Each level's per-request samples over its steady window, from the session's finished records."""
    t0 = replay.config.t0_ns
    windows = {
        int(lv["level_id"]): (t0 + lv["window_from_s"] * 1e9, t0 + lv["window_to_s"] * 1e9)
        for lv in doc.get("levels", [])
        if lv.get("window_from_s") is not None and lv.get("window_to_s") is not None
    }
    acc: dict[int, dict[str, list[Any]]] = {i: {"ttft": [], "tpot": [], "itl": [], "ends": [], "chunks": []}
                                             for i in windows}  # fmt: skip
    decode = replay.config.decoder
    for e in replay.session.events:
        if e.get("k") != "b":
            continue
        batch = decode._build("Batch", e["b"])
        for rec in batch.records:
            span = windows.get(rec.level_id)
            if span is None or rec.status != "ok":
                continue
            a = acc[rec.level_id]
            if span[0] <= rec.end_ns <= span[1]:
                a["ends"].append(rec.end_ns)
            chunks = (
                np.frombuffer(rec.chunk_ns, dtype=np.int64) if len(rec.chunk_ns) else np.empty(0, np.int64)
            )
            inside = chunks[(chunks >= span[0]) & (chunks <= span[1])]
            a["chunks"].append(inside)
            if not span[0] <= rec.sent_ns <= span[1] or rec.first_content_ns is None:
                continue
            a["ttft"].append((rec.first_content_ns - rec.sent_ns) / 1e6)
            n = rec.output_tokens if rec.output_tokens is not None else len(chunks)
            if n > 1:
                a["tpot"].append((rec.end_ns - rec.first_content_ns) / 1e6 / (n - 1))
            if len(chunks) > 1:
                a["itl"].append(np.diff(chunks) / 1e6)
    out: dict[int, dict[str, npt.NDArray[np.float64]]] = {}
    for level_id, a in acc.items():
        lo, hi = windows[level_id]
        width_ns = max(MIN_BIN_S * 1e9, (hi - lo) / BINS)
        edges = np.arange(lo, hi + 1, width_ns)
        arrivals = np.concatenate(a["chunks"]) if a["chunks"] else np.empty(0)
        per_s = 1e9 / width_ns
        out[level_id] = {
            "ttft": np.asarray(a["ttft"], float),
            "tpot": np.asarray(a["tpot"], float),
            "itl": np.concatenate(a["itl"]) if a["itl"] else np.empty(0),
            "tok_bins": np.histogram(arrivals, edges)[0] * per_s if len(edges) > 1 else np.empty(0),
            "req_bins": np.histogram(np.asarray(a["ends"]), edges)[0] * per_s
            if len(edges) > 1
            else np.empty(0),
        }
    return out


def _stat(sample: str, key: str) -> Any:
    if sample.endswith("_bins"):
        return np.mean
    q = 99.0 if key.startswith("p99") else 50.0
    return lambda x, axis=None: np.percentile(x, q, axis=axis)


def bootstrap_interval(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], sample: str, key: str
) -> tuple[float, float] | None:
    """The 95 % bootstrap interval of stat(b) - stat(a), or None with too few samples (fewer than 5)."""
    if len(a) < 5 or len(b) < 5:
        return None
    rng = np.random.default_rng(SEED)
    stat = _stat(sample, key)
    ra = a[rng.integers(0, len(a), (BOOTSTRAP_ROUNDS, len(a)))]
    rb = b[rng.integers(0, len(b), (BOOTSTRAP_ROUNDS, len(b)))]
    diffs = stat(rb, axis=1) - stat(ra, axis=1)
    lo, hi = np.percentile(diffs, [50 * (1 - CONFIDENCE), 100 - 50 * (1 - CONFIDENCE)])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Difference:
    metric: str
    base: float | None
    other: float | None
    percent: float | None
    verdict: str
    """"better", "worse", "within noise", or "unjudged" (no samples to judge by)."""


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None


def compare_levels(base: Run, other: Run) -> list[dict[str, Any]]:
    """Per load present in both: each metric's difference of ``other`` from ``base``."""
    mine = {load_key(lv): lv for lv in base.levels()}
    rows = []
    for lv in other.levels():
        key = load_key(lv)
        ref = mine.get(key)
        if ref is None:
            continue
        diffs = []
        for name, result_key, sample, higher_better in METRICS:
            x, y = _num(ref.get(result_key)), _num(lv.get(result_key))
            pct = None if x is None or y is None or x == 0 else (y - x) / x * 100
            sa = base.samples.get(int(ref["level_id"]), {}).get(sample)
            sb = other.samples.get(int(lv["level_id"]), {}).get(sample)
            interval = None if sa is None or sb is None else bootstrap_interval(sa, sb, sample, result_key)
            if interval is None:
                verdict = "unjudged"
            elif interval[0] <= 0 <= interval[1]:
                verdict = "within noise"
            else:
                up = interval[0] > 0
                verdict = "better" if up == higher_better else "worse"
            diffs.append(Difference(name, x, y, pct, verdict))
        for name, server_key in SERVER:
            x = _num((ref.get("server") or {}).get(server_key))
            y = _num((lv.get("server") or {}).get(server_key))
            pct = None if x is None or y is None or x == 0 else (y - x) / x * 100
            diffs.append(Difference(f"server {name}", x, y, pct, "unjudged"))
        errors = (int(ref.get("failed", 0)), int(lv.get("failed", 0)))
        rows.append({"load": key, "level_ids": (ref["level_id"], lv["level_id"]), "errors": errors,
                     "differences": diffs})  # fmt: skip
    return rows


def knee_of(run: Run) -> float | None:
    knee = (run.doc.get("saturation") or {}).get("knee")
    return None if knee is None else _num(knee.get("value"))


def mismatches(runs: Sequence[Run]) -> list[str]:
    """What differs between the runs' setups (model, ISL, OSL, endpoint): compared only with a warning."""
    out = []
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


def comparison(paths: Sequence[Path]) -> dict[str, Any]:
    """The whole comparison of the first run with each other, as plain data (``--json`` prints it)."""
    runs = [load_run(p) for p in paths]
    return {
        "runs": [
            {
                "path": str(r.path),
                "knee": knee_of(r),
                "cut": r.cut,
                "model": (r.doc.get("target") or {}).get("model"),
            }
            for r in runs
        ],
        "warnings": mismatches(runs),
        "noise": f"{CONFIDENCE:.0%} bootstrap interval ({BOOTSTRAP_ROUNDS} rounds) of the difference",
        "pairs": [
            {"base": str(runs[0].path), "other": str(r.path), "levels": compare_levels(runs[0], r)}
            for r in runs[1:]
        ],
        "curves": [
            {
                "path": str(r.path),
                "points": sorted(
                    ((load_key(lv)[1], _num(lv.get("output_throughput"))) for lv in r.levels()),
                    key=lambda point: point[0],
                ),
            }
            for r in runs
        ],
    }
