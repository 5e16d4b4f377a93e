"""A run's levels as the results model types them (`Level` and its parts), apart from the run's document
(`tui.engine.results.model`, which names them too): one load level over its steady window, in ``vllm bench
serve``'s vocabulary plus tokentop's keys. Field names are the file's keys, as there."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

from tui.engine.results.codec import key
from tui.engine.results.level_server import LevelServer

Mode = Literal["concurrency", "rate", "trace"]


@dataclass(frozen=True, kw_only=True)
class Stats:
    """One latency metric of a level, in ms (``{stat}_{metric}_ms``); None without samples."""

    mean: float | None
    median: float | None
    std: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True, kw_only=True)
class Histogram:
    """Counts over log-spaced bins [edges_ms[i], edges_ms[i+1]) in ms; both empty without samples."""

    edges_ms: tuple[float, ...]
    counts: tuple[int, ...]

    @property
    def total(self) -> int:
        """Samples counted."""
        return sum(self.counts)

    def check(self) -> str | None:
        """Why these are no histogram (the reader's check), or None."""
        if any(c < 0 for c in self.counts):
            return "counts must be whole numbers, none negative"
        if len(self.edges_ms) != (len(self.counts) + 1 if self.counts else 0):
            return f"{len(self.edges_ms)} edges for {len(self.counts)} counts"
        if any(b <= a for a, b in pairwise(self.edges_ms)):
            return "edges must rise"
        return None


@dataclass(frozen=True, kw_only=True)
class Histograms:
    """A level's histograms over exactly the population of its latency stats."""

    ttft: Histogram
    e2el: Histogram
    itl: Histogram
    """vLLM's ITL: the gaps between content chunks."""


@dataclass(frozen=True, kw_only=True)
class LevelClient:
    """The load generator's health during one level (raw rolling maxima), and its timing bound."""

    max_loop_lag_p99_ms: float = 0.0
    max_cpu_share: float = 0.0
    timing_bound_ms: float | None = field(default=None, metadata=key(omit_none=True))
    """Every latency of the level is ``± timing_bound_ms`` (the loop lag p99 over its window)."""
    timing_uncertain: tuple[str, ...] = ()
    """The figures (``ttft_p99``, ...) the bound is 5 % or more of: distrust those."""
    limited_by: tuple[str, ...] | None = field(default=None, metadata=key(omit_none=True))
    """Where the client limited the load: the signs that showed it (``cpu``, ``loop_lag``, ``in_flight``,
    ``send_lag``); absent where it did not."""
    mean_in_flight: float | None = field(default=None, metadata=key(omit_none=True))
    """A closed loop's requests in flight averaged over the window (absent where not judged)."""
    send_shortfall: float | None = field(default=None, metadata=key(omit_none=True))
    """An uncapped open loop's share of its schedule the sends fell behind (absent where not judged)."""


@dataclass(frozen=True, kw_only=True)
class LevelSlo:
    """A level's SLO attainment (`tui.engine.aggregate.attainment`): of the window's requests, those meeting
    every objective; failed ones count against, cut ones (``cut``) apart."""

    attainment: float | None
    attainment_low: float
    attainment_high: float
    """Wilson's 95 % interval of ``attainment``."""
    met: int
    requests: int
    cut: int = 0
    request_goodput: float | None = None
    output_goodput: float | None = None
    usd_per_mtok_goodput: float | None = field(default=None, metadata=key(omit_none=True))


def _is_rate(level: Level) -> bool:
    return level.mode == "rate"


def _is_open(level: Level) -> bool:
    """Open loop: arrivals at a rate or at a trace's times (their sends have a schedule)."""
    return level.mode in ("rate", "trace")


@dataclass(frozen=True, kw_only=True)
class PercentileTrust:
    """How far to trust one percentile: its distribution-free 95 % interval
    (`tui.engine.aggregate.intervals`)."""

    ci95_ms: tuple[float, float] | None = None
    bounded: bool = False
    """False: too few samples for an interval (a p99 of 40 requests is their largest, not a p99)."""


@dataclass(frozen=True, kw_only=True)
class MetricPopulation:
    """What one of a level's figures covers (`tui.engine.results.population`)."""

    n: int | None = field(default=None, metadata=key(omit_none=True))
    """Its samples; absent for the output throughput, which counts tokens."""
    unfinished_included: bool = False
    ci95: tuple[float, float] | None = field(default=None, metadata=key(when=lambda p: p.has_ci95))
    """The output throughput's only: a bootstrap 95 % interval over the window's seconds, null under 4 s."""
    has_ci95: bool = field(default=False, metadata=key(presence="ci95"))
    since_s: float | None = field(default=None, metadata=key(when=lambda p: p.has_since))
    """TTFT's only: from when its samples count (seconds into the run), null when unknown."""
    has_since: bool = field(default=False, metadata=key(presence="since_s"))
    p50: PercentileTrust | None = field(default=None, metadata=key(omit_none=True))
    p90: PercentileTrust | None = field(default=None, metadata=key(omit_none=True))
    p95: PercentileTrust | None = field(default=None, metadata=key(omit_none=True))
    p99: PercentileTrust | None = field(default=None, metadata=key(omit_none=True))
    null_because: str | None = field(default=None, metadata=key(omit_none=True))
    """Why the figure is null: it has no sample."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))


@dataclass(frozen=True, kw_only=True)
class CacheReset:
    """A request that the server drop its prefix cache (`tui.engine.host.cache_reset`), and its answer."""

    at_s: float
    """When it was asked, in run seconds."""
    done: bool
    """The server dropped its cache: the level started cold."""
    refused: bool = False
    """The server serves no reset (404, 405, 501): the level ran on whatever the cache held."""
    line: str = ""
    """What tokentop said of it."""


@dataclass(frozen=True, kw_only=True)
class Level:
    """One load level over its steady window, in ``vllm bench serve``'s vocabulary plus tokentop's keys."""

    level_id: int
    mode: Mode
    concurrency: int | None = field(default=None, metadata=key(omit_none=True))
    """Users (closed loop); None for a rate level."""
    request_rate: float | None = field(default=None, metadata=key(omit_none=True))
    """Requests/s offered (open loop); None for a concurrency level."""
    trace_speed: float | None = field(default=None, metadata=key(omit_none=True))
    """A trace replay's speed-up (its gaps divided by it); None outside a replay."""
    arrival: str | None = field(default=None, metadata=key(when=_is_rate))
    max_concurrency: int | None = field(default=None, metadata=key(when=_is_open))
    duration: float | None
    completed: int
    failed: int
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float | None
    output_throughput: float | None
    total_token_throughput: float | None
    request_goodput: float | None = field(default=None, metadata=key(omit_none=True))
    slo: LevelSlo | None = field(default=None, metadata=key(omit_none=True))
    usd_per_mtok_output: float | None = field(default=None, metadata=key(omit_none=True))
    """With ``--cost-per-hour``: ``cost_per_hour / 3600 / output_throughput * 1e6`` (`aggregate.cost`)."""
    usd_per_mtok_input: float | None = field(default=None, metadata=key(omit_none=True))
    ttft: Stats = field(metadata=key(flat="ttft"))
    tpot: Stats = field(metadata=key(flat="tpot"))
    itl: Stats = field(metadata=key(flat="itl"))
    """vLLM's ITL: gaps between consecutive content chunks, pooled."""
    e2el: Stats = field(metadata=key(flat="e2el"))
    itl_e2e: Stats | None = field(default=None, metadata=key(flat="itl_e2e"))
    tokens_per_chunk: float | None = None
    per_request_output_throughput: float | None = None
    steady: bool = True
    too_short: bool = False
    steady_from_s: float | None = None
    window_from_s: float | None = None
    window_to_s: float | None = None
    started_s: float | None = None
    ended_s: float | None = None
    level_completed: int | None = None
    level_failed: int | None = None
    cancelled: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    exact_stats: bool | None = None
    client: LevelClient = field(default_factory=LevelClient)
    sched_lag: Stats | None = field(default=None, metadata=key(flat="sched_lag", when=_is_open))
    dropped_arrivals: int = field(default=0, metadata=key(when=_is_open))
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    mean_reasoning_tokens: float | None = None
    ttfa: Stats | None = field(default=None, metadata=key(flat="ttfa"))
    cached_prompt_tokens: int | None = None
    prefix_cache_hit_rate: float | None = None
    warm_cache: bool = False
    """Served from a warm prefix cache: prompts that share no prefix hit it beyond the chat template's share
    (`tui.engine.control.checks.unexpected_hits`); the evidence is ``prefix_cache_hit_rate`` and
    ``cached_prompt_tokens``."""
    cache_reset: CacheReset | None = field(default=None, metadata=key(omit_none=True))
    """The prefix cache reset asked for before this level (or during it, where refused); absent: none."""
    server_down_s: float = field(default=0.0, metadata=key(when=lambda lv: lv.server_down_s > 0))
    """Seconds of the window the server did not answer (an outage): the rates are over the rest. Written
    only when there was one."""
    client_saturated: bool = False
    """The load generator was saturated for half the window or more: the client's figures, never the knee."""
    coalesced_chunk_gaps: int = 0
    """Chunk gaps of 0 in the window (chunks that came in one read)."""
    max_output_tokens_per_s: float | None = field(default=None, metadata=key(omit_none=True))
    """vLLM's peak: the most output tokens arriving in one second of the window."""
    max_concurrent_requests: int | None = field(default=None, metadata=key(omit_none=True))
    """vLLM's peak: the most requests in flight during one second of the window."""
    server: LevelServer | None = field(default=None, metadata=key(when=lambda lv: lv.scraped))
    """The server's /metrics over the window (`tui.engine.server_metrics`); written while ``scraped``."""
    scraped: bool = field(default=False, metadata=key(presence="server"))
    """The run's server was scraped: the level writes ``server`` (null when it has no figures)."""
    histograms: Histograms | None = field(default=None, metadata=key(omit_none=True))
    measured_over: str = "requests"
    """``requests``: every figure over whole requests sent in the window; ``arrivals``: answers outlive it, so
    throughput, TTFT and ITL count what arrived in it from every stream (manual: ``live``)."""
    in_flight_at_end: int = 0
    """Streams of the level unfinished when the figures were taken (in flight, or cancelled at quit)."""
    partial_output_tokens: int = 0
    """Output tokens of unfinished streams counted in ``output_throughput``."""
    population: dict[str, MetricPopulation] | None = field(default=None, metadata=key(omit_none=True))
    """Per metric: ``n``, ``unfinished_included``, ``null_because`` (`tui.engine.results.population`)."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))

    @property
    def value(self) -> float:
        """Users (closed loop), requests/s offered (open loop) or a trace's speed-up."""
        v = {"concurrency": self.concurrency, "trace": self.trace_speed}.get(self.mode, self.request_rate)
        return float("nan") if v is None else float(v)

    @property
    def name(self) -> str:
        """As the tables name it: "c=8", "r=2.5/s", "x2"."""
        if self.mode == "trace":
            return f"x{self.value:g}"
        return f"c={self.value:g}" if self.mode == "concurrency" else f"r={self.value:g}/s"

    def check(self) -> str | None:
        """The reader's check: a level says its load."""
        if self.mode == "concurrency" and self.concurrency is None:
            return "no 'concurrency'"
        if self.mode == "rate" and self.request_rate is None:
            return "no 'request_rate'"
        if self.mode == "trace" and self.trace_speed is None:
            return "no 'trace_speed'"
        return None
