"""Reading a results file back: typed levels for the faces that compare or replay runs.

`read_results` takes what `tui.engine.host.results.build_results` wrote and returns a `ResultsFile`; each
level's numbers carry the same names and units as `tui.engine.snapshot.LevelView` (``output_tps``,
``ttft.p99``...), so code written for live views reads files too. JSON ``null`` (a NaN when written, e.g. no
samples) reads back as NaN. A level's latency histograms (``histograms``: ttft, e2el, itl) read as
`LatencyHistogram`s, None in a file from before they were saved. A missing, non-JSON or wrong-shape file
raises `ResultsFileError`: one line that names the file and, for a wrong shape, the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, cast

import orjson

from tui.engine.config import LoadMode

NAN = float("nan")


class ResultsFileError(ValueError):
    """The file is not a readable tokentop results file; the message is one line naming it."""


@dataclass(frozen=True)
class LatencyStats:
    """One latency metric of a level, in ms (NaN when the level had no samples)."""

    mean: float
    median: float
    std: float
    p50: float
    p90: float
    p95: float
    p99: float
    min: float = NAN
    max: float = NAN


@dataclass(frozen=True)
class LatencyHistogram:
    """Counts of one latency metric of a level over log-spaced bins [edges_ms[i], edges_ms[i+1]) (ms); empty
    when the level had no samples."""

    edges_ms: tuple[float, ...] = ()
    counts: tuple[int, ...] = ()

    @property
    def total(self) -> int:
        """Samples counted."""
        return sum(self.counts)


@dataclass(frozen=True)
class ResultsLevel:
    """One load level as written: its steady-state window's counts, rates and latency stats."""

    level_id: int
    mode: LoadMode
    value: float
    """Users (closed loop) or requests/s offered (open loop)."""
    window_s: float
    """The steady window's length (the throughput denominator; vLLM's ``duration``)."""
    window_completed: int
    window_failed: int
    input_tokens: int
    output_tokens: int
    request_per_s: float
    output_tps: float
    total_tps: float
    ttft: LatencyStats
    tpot: LatencyStats
    itl_chunk: LatencyStats
    """vLLM's ITL: gaps between content chunks (the file's ``itl``)."""
    e2el: LatencyStats
    itl_e2e: LatencyStats
    tokens_per_chunk: float
    steady: bool
    goodput_per_s: float | None = None
    errors: tuple[tuple[str, int], ...] = ()
    too_short: bool = False
    """The window was too short to measure: the rates read NaN (they were written null)."""
    arrival: str | None = None
    max_concurrency: int | None = None
    ttft_hist: LatencyHistogram | None = None
    """The histograms over the population of the stats; None in files written before they were saved."""
    e2el_hist: LatencyHistogram | None = None
    itl_chunk_hist: LatencyHistogram | None = None
    """Of vLLM's ITL, the gaps between content chunks (the file's ``histograms.itl``)."""


@dataclass(frozen=True)
class ResultsFile:
    """A results file, typed: what comparing or replaying runs needs."""

    path: Path
    tool: str
    version: str
    started_at: str
    url: str
    model: str
    endpoint: str
    isl: int
    osl: int
    workers: int
    levels: tuple[ResultsLevel, ...]
    knee_level_id: int | None
    """The level at the knee, or None when none was found."""
    peak_output_tps: float | None
    client_saturated: bool
    completed: int
    failed: int
    fatal: str | None
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    notices: tuple[str, ...] = ()
    interrupted_by: str | None = None
    """Why the run was cut short ("quit", "SIGINT", ...), None when it finished (or the file predates it)."""


_MISSING: Any = object()


class _Reader:
    """Typed access to one JSON object, with errors naming the file and the key's path in it."""

    def __init__(self, path: Path, data: Any, where: str = "") -> None:
        self.path, self.where = path, where
        if not isinstance(data, dict):
            raise self.error(f"expected an object{self.at('')}, got {type(data).__name__}")
        self.data: dict[str, Any] = data

    def at(self, key: str) -> str:
        name = f"{self.where}.{key}" if self.where and key else self.where or key
        return f" at {name}" if name else ""

    def error(self, message: str) -> ResultsFileError:
        return ResultsFileError(f"{self.path}: not a tokentop results file: {message}")

    def get(self, key: str, default: Any = _MISSING) -> Any:
        if key in self.data:
            return self.data[key]
        if default is _MISSING:
            raise self.error(f"no {key!r}{self.at('')}")
        return default

    def child(self, key: str) -> _Reader:
        return _Reader(self.path, self.get(key), f"{self.where}.{key}" if self.where else key)

    def items(self, key: str) -> list[_Reader]:
        value = self.get(key)
        if not isinstance(value, list):
            raise self.error(f"expected a list{self.at(key)}")
        base = f"{self.where}.{key}" if self.where else key
        return [_Reader(self.path, v, f"{base}[{i}]") for i, v in enumerate(value)]

    def optional_text(self, key: str) -> str | None:
        value = self.get(key, None)
        if value is not None and not isinstance(value, str):
            raise self.error(f"expected text{self.at(key)}, got {value!r}")
        return value

    def text(self, key: str, default: str | None = None) -> str:
        value = self.optional_text(key) if default is not None else self.get(key)
        if value is None:
            return default or ""
        if not isinstance(value, str):
            raise self.error(f"expected text{self.at(key)}, got {value!r}")
        return value

    def optional_whole(self, key: str) -> int | None:
        value = self.get(key, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.error(f"expected a whole number{self.at(key)}, got {value!r}")
        return value

    def whole(self, key: str, default: int | None = None) -> int:
        value = self.optional_whole(key) if default is not None else self.get(key)
        if value is None and default is not None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"expected a whole number{self.at(key)}, got {value!r}")
        return value

    def optional_number(self, key: str, *, required: bool = False) -> float | None:
        """A number, or None when null (a NaN when written) or, unless ``required``, missing."""
        value = self.get(key) if required else self.get(key, None)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"expected a number{self.at(key)}, got {value!r}")
        return float(value)

    def number(self, key: str, *, required: bool = True) -> float:
        """A number; null, or missing when not ``required``, reads as NaN."""
        value = self.optional_number(key, required=required)
        return NAN if value is None else value

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.error(f"expected true or false{self.at(key)}, got {value!r}")
        return value


def _stats(r: _Reader, prefix: str, *, required: bool = True) -> LatencyStats:
    def n(stat: str, req: bool = required) -> float:
        return r.number(f"{stat}_{prefix}_ms", required=req)

    return LatencyStats(
        mean=n("mean"),
        median=n("median"),
        std=n("std"),
        p50=n("p50"),
        p90=n("p90"),
        p95=n("p95"),
        p99=n("p99"),
        min=n("min", False),
        max=n("max", False),
    )


def _histogram(r: _Reader, key: str) -> LatencyHistogram | None:
    """``histograms.<key>`` of a level: edges one more than counts (or both empty), rising; counts whole and
    not negative. None when the level has no histograms (a file from before they were saved)."""
    if r.get("histograms", None) is None:
        return None
    h = r.child("histograms").child(key)
    edges, counts = h.get("edges_ms"), h.get("counts")
    if not isinstance(edges, list) or not all(
        isinstance(e, int | float) and not isinstance(e, bool) for e in edges
    ):
        raise h.error(f"expected a list of numbers{h.at('edges_ms')}")
    if not isinstance(counts, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts
    ):
        raise h.error(f"expected a list of whole numbers, none negative{h.at('counts')}")
    if len(edges) != (len(counts) + 1 if counts else 0):
        raise h.error(f"{len(edges)} edges for {len(counts)} counts{h.at('')}")
    if any(b <= a for a, b in pairwise(edges)):
        raise h.error(f"edges must rise{h.at('edges_ms')}")
    return LatencyHistogram(tuple(float(e) for e in edges), tuple(counts))


def _level(r: _Reader) -> ResultsLevel:
    mode = r.text("mode")
    if mode not in ("concurrency", "rate", "trace"):
        raise r.error(f"mode must be concurrency, rate or trace{r.at('mode')}, got {mode!r}")
    value = (
        float(r.whole("concurrency"))
        if mode == "concurrency"
        else r.number("trace_speed")
        if mode == "trace"
        else r.number("request_rate")
    )
    errors = r.child("errors") if "errors" in r.data else None
    error_counts = tuple((k, errors.whole(k)) for k in errors.data) if errors is not None else ()
    return ResultsLevel(
        level_id=r.whole("level_id"),
        mode=cast(LoadMode, mode),
        value=value,
        window_s=r.number("duration"),
        window_completed=r.whole("completed"),
        window_failed=r.whole("failed"),
        input_tokens=r.whole("total_input_tokens"),
        output_tokens=r.whole("total_output_tokens"),
        request_per_s=r.number("request_throughput"),
        output_tps=r.number("output_throughput"),
        total_tps=r.number("total_token_throughput"),
        ttft=_stats(r, "ttft"),
        tpot=_stats(r, "tpot"),
        itl_chunk=_stats(r, "itl"),
        e2el=_stats(r, "e2el"),
        itl_e2e=_stats(r, "itl_e2e", required=False),
        tokens_per_chunk=r.number("tokens_per_chunk", required=False),
        steady=r.flag("steady", True),
        goodput_per_s=r.optional_number("request_goodput"),
        errors=error_counts,
        too_short=r.flag("too_short", False),
        arrival=r.optional_text("arrival"),
        max_concurrency=r.optional_whole("max_concurrency"),
        ttft_hist=_histogram(r, "ttft"),
        e2el_hist=_histogram(r, "e2el"),
        itl_chunk_hist=_histogram(r, "itl"),
    )


def read_results(path: Path) -> ResultsFile:
    """The results file at ``path``, typed; `ResultsFileError` (a `ValueError`) if it cannot be."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ResultsFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ResultsFileError(f"{path}: not JSON: {str(exc).splitlines()[0]}") from None
    r = _Reader(path, data)
    tool = r.text("tool")
    if tool != "tokentop":
        raise r.error(f"tool is {tool!r}, not 'tokentop'")
    target, config, saturation, totals = (r.child(k) for k in ("target", "config", "saturation", "totals"))
    client = r.child("client") if "client" in r.data else None
    notices = r.get("notices", [])
    if not isinstance(notices, list) or not all(isinstance(n, str) for n in notices):
        raise r.error("notices must be a list of text")
    return ResultsFile(
        path=path,
        tool=tool,
        version=r.text("version"),
        started_at=r.text("started_at", ""),
        url=target.text("url"),
        model=target.text("model"),
        endpoint=target.text("endpoint"),
        isl=config.whole("isl"),
        osl=config.whole("osl"),
        workers=config.whole("workers", 1),
        levels=tuple(_level(lv) for lv in r.items("levels")),
        knee_level_id=None
        if saturation.get("knee", None) is None
        else saturation.child("knee").whole("level_id"),
        peak_output_tps=saturation.optional_number("peak_output_throughput"),
        client_saturated=client.flag("saturated", False) if client is not None else False,
        completed=totals.whole("completed"),
        failed=totals.whole("failed"),
        fatal=r.optional_text("fatal"),
        slo_ttft_ms=config.optional_number("slo_ttft_ms"),
        slo_tpot_ms=config.optional_number("slo_tpot_ms"),
        notices=tuple(notices),
        interrupted_by=r.optional_text("interrupted_by"),
    )
