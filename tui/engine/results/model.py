"""The results document as typed data: one `Results` per run (a `WatchResults` for a passive watch).

Field names are the file's keys (a `Stats` is spread into vLLM's ``mean_ttft_ms``... keys), so the manual, the
writer and the reader use one vocabulary. A number that could not be measured is None (JSON null), never NaN
or 0. Every field added later has a default, so older files still read; keys the model does not know are kept
in ``extra`` and written back. The meaning of each key is `tui.engine.results.definitions.DEFINITIONS`.

To add a key: a field with a default in its class (its place among the fields is its place in the file),
set by `tui.engine.results.build`, and a line on the manual's results page (a test checks every key is there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

from tui.engine.results.ab import AbCapacity, AbLevel
from tui.engine.results.capacity import CapacityAtSlo
from tui.engine.results.codec import key
from tui.engine.results.cost import CostAtSlo
from tui.engine.results.level_server import LevelServer
from tui.engine.results.repeat import RepeatSet
from tui.engine.results.watch_model import WatchResults

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


@dataclass(frozen=True, kw_only=True)
class Target:
    url: str
    """Without any user:password part or query value."""
    model: str
    endpoint: str
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))


@dataclass(frozen=True, kw_only=True)
class IslProbe:
    """Whether the ISL probe was asked for and sent, and what it measured."""

    asked: bool = False
    sent: bool = False
    skipped: str | None = None
    """Why it was not sent though asked; None when it was not skipped."""
    observations: tuple[tuple[int, int], ...] = ()
    """The (words, prompt tokens) pairs it measured."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))


@dataclass(frozen=True, kw_only=True)
class Workload:
    """The workload as configured (`tui.engine.config.WorkloadConfig`'s fields but the probe's measurements);
    its nested parts (length distributions, scenarios, dataset, trace) as their JSON objects."""

    isl: int = 128
    osl: int = 128
    fixed_osl: bool = True
    seed: int = 0
    prompt_salt: str = ""
    isl_dist: dict[str, Any] | None = None
    osl_dist: dict[str, Any] | None = None
    scenarios: tuple[dict[str, Any], ...] = ()
    dataset: dict[str, Any] | None = None
    shared_prefix: int = 0
    turns: int = 1
    trace: dict[str, Any] | None = None
    tokenizer: str | None = None
    shared_prefix_sized: tuple[int, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))


@dataclass(frozen=True, kw_only=True)
class Config:
    """What the run was asked for (no secret: header names only)."""

    isl: int
    osl: int
    fixed_osl: bool = False
    seed: int = 0
    prompt_salt: str = ""
    """The run's prompt salt ("" for none): ``--repeat-prompts`` with this file sends the same prompts."""
    timeout_s: float | None = None
    workers: int = 1
    header_names: tuple[str, ...] = ()
    extra_body: dict[str, Any] = field(default_factory=dict)
    demo: bool = False
    endpoint_path: str | None = None
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    slo_e2e_ms: float | None = field(default=None, metadata=key(omit_none=True))
    slo_target: float | None = field(default=None, metadata=key(omit_none=True))
    """With an SLO: the attainment the capacity at SLO needs (its 95 % lower bound)."""
    min_window_s: float | None = None
    min_steady_requests: int | None = None
    workload: Workload | None = None
    isl_probe: IslProbe | None = None
    placement: dict[str, Any] | None = field(default=None, metadata=key(omit_none=True))
    """With ``--ray``: the cluster's address, workers per node and what a lost node does."""
    cost_per_hour: float | None = field(default=None, metadata=key(omit_none=True))
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))


@dataclass(frozen=True, kw_only=True)
class Knee:
    level_id: int
    value: float
    output_throughput: float
    peak_output_throughput: float


@dataclass(frozen=True, kw_only=True)
class Saturation:
    knee: Knee | None = None
    peak_output_throughput: float | None = None
    """Over the levels the knee is looked for among: those where the client was not the limit."""
    client_limited_levels: tuple[int, ...] = ()
    """Level ids measured while the client was saturated (none of them is the knee)."""
    rule: str = ""
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))


@dataclass(frozen=True, kw_only=True)
class Ramp:
    """What the auto ramp said when it stopped, as the status bar showed it: its knee and peak are taken
    with the rule of `Saturation` from its own levels, ended and settled first, so they are these levels'
    saved figures."""

    stopped_by: str
    """``knee``, ``slo``, ``errors``, ``client`` (the client was the limit), ``limit`` or ``fatal``."""
    reason: str
    mode: Mode
    level_ids: tuple[int, ...] = ()
    stopped_at_level_id: int | None = None
    knee: Knee | None = None
    peak_output_throughput: float | None = None
    peak_level_id: int | None = None
    settled: bool = True
    """False: it quoted before every request of its levels was in (after a bounded wait)."""
    capacity_at_slo: float | None = field(default=None, metadata=key(omit_none=True))
    """With an SLO: the highest load whose attainment's 95 % lower bound met ``--slo-target``."""
    capacity_level_id: int | None = field(default=None, metadata=key(omit_none=True))
    capacity_output_goodput: float | None = field(default=None, metadata=key(omit_none=True))
    """Output tokens/s of that level's requests that met the SLO."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))


@dataclass(frozen=True, kw_only=True)
class ClientLast:
    loop_lag_p99_ms: float = 0.0
    cpu_share: float = 0.0
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class Client:
    """The load generator's own health over the whole run."""

    workers: int = 1
    stream_transport: str | None = field(default=None, metadata=key(omit_none=True))
    """What carried the workers' streams: protocol, aiohttp or httpx (absent in older files)."""
    stream_transport_note: str | None = field(default=None, metadata=key(omit_none=True))
    """Why that is not the transport asked for (through a proxy the protocol path hands over)."""
    redirects: str | None = field(default=None, metadata=key(omit_none=True))
    """How a redirect answer to a stream is treated (never followed)."""
    max_loop_lag_p99_ms: float = 0.0
    max_cpu_share: float = 0.0
    lag_threshold_ms: float | None = None
    cpu_threshold: float | None = None
    health_window_s: float | None = None
    saturated: bool = False
    saturated_spans_s: tuple[tuple[float | None, float | None], ...] = ()
    last: ClientLast = field(default_factory=ClientLast)
    nodes: tuple[dict[str, Any], ...] | None = field(default=None, metadata=key(omit_none=True))
    """With ``--ray``: each node the workers ran on (its clock offset, workers, when it was lost)."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))


@dataclass(frozen=True, kw_only=True)
class Totals:
    completed: int
    failed: int
    cancelled: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    malformed_lines_skipped: int = 0
    dropped_arrivals: int = 0
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))


@dataclass(frozen=True, kw_only=True)
class Outage:
    """A span the server did not answer, in run seconds."""

    start_s: float
    end_s: float | None
    """None: it had not come back when the run ended."""
    cause: str
    """What its failures were: ``connect``, ``disconnect``, ``HTTP 503``."""


@dataclass(frozen=True, kw_only=True)
class Clock:
    """The run's zero on both clocks, so a requests-log stamp (``perf_counter_ns``) becomes wall time:
    ``stamp - perf_t0_ns + unix_t0_ns``; the levels' ``*_s`` times are seconds from the same zero."""

    perf_t0_ns: int
    unix_t0_ns: int


@dataclass(frozen=True, kw_only=True)
class Results:
    """A run's results document."""

    tool: str = "tokentop"
    version: str
    started_at: str = ""
    """Local time, ``%Y-%m-%dT%H:%M:%S%z``."""
    interrupted: bool = False
    interrupted_by: str | None = None
    """Why the run was cut short ("quit", "SIGINT", ...); None when it finished."""
    repeat: RepeatSet | None = field(default=None, metadata=key(omit_none=True))
    target: Target
    config: Config
    definitions: dict[str, str] = field(default_factory=dict)
    levels: tuple[Level, ...]
    saturation: Saturation
    ramp: Ramp | None = field(default=None, metadata=key(omit_none=True))
    """The auto ramp's verdict when one stopped by itself in the run (the latest); absent otherwise."""
    capacity_at_slo: CapacityAtSlo | None = field(default=None, metadata=key(omit_none=True))
    """With an SLO: its capacity over every level of the run; absent without one."""
    cost_at_slo: CostAtSlo | None = field(default=None, metadata=key(omit_none=True))
    client: Client = field(default_factory=Client)
    totals: Totals
    fatal: str | None = None
    notices: tuple[str, ...] = ()
    outages: tuple[Outage, ...] = field(default=(), metadata=key(when=lambda r: bool(r.outages)))
    """When the server stopped answering and came back (`tui.engine.aggregate.outages`); written only when
    it did."""
    server: dict[str, Any] | None = None
    """The run's scrape: url, kind, model, status, message, scrapes, failures, found; None: not scraped."""
    clock: Clock | None = field(default=None, metadata=key(omit_none=True))
    """None in files written before it was saved (and by engines that have no clock)."""
    ab: Ab | None = field(default=None, metadata=key(omit_none=True))
    extra: dict[str, Any] = field(default_factory=dict, metadata=key(extra=True))

    def check(self) -> str | None:
        return None if self.tool == "tokentop" else f"tool is {self.tool!r}, not 'tokentop'"

    @property
    def modes(self) -> tuple[Mode, ...]:
        """The load modes of the levels, in order of first appearance (two after `m` in the app)."""
        return tuple(dict.fromkeys(lv.mode for lv in self.levels))


@dataclass(frozen=True, kw_only=True)
class Ab:
    """``--ab``: B's own run under A's levels, and each level judged B against A (`tui.engine.results.ab`)."""

    mode: str
    threshold_pct: float
    b: Results
    levels: tuple[AbLevel, ...] = ()
    capacity: AbCapacity | None = field(default=None, metadata=key(omit_none=True))
    """With an SLO: each side's capacity at it."""


Document = Results | WatchResults
"""What an engine's ``results()`` returns and a results file holds."""
