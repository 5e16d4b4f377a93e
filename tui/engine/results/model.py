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
from typing import Any

from tui.engine.results.ab import AbCapacity, AbLevel
from tui.engine.results.capacity import CapacityAtSlo
from tui.engine.results.codec import key
from tui.engine.results.cost import CostAtSlo
from tui.engine.results.level import (
    CacheReset,
    Histogram,
    Histograms,
    Level,
    LevelClient,
    LevelSlo,
    MetricPopulation,
    Mode,
    PercentileTrust,
    Stats,
)
from tui.engine.results.repeat import RepeatSet
from tui.engine.results.watch_model import WatchResults

__all__ = [  # the levels' types are `tui.engine.results.level`'s, named here too
    "Ab",
    "CacheReset",
    "Client",
    "ClientLast",
    "Clock",
    "Config",
    "Document",
    "Histogram",
    "Histograms",
    "IslProbe",
    "Knee",
    "Level",
    "LevelClient",
    "LevelSlo",
    "MetricPopulation",
    "Mode",
    "Outage",
    "PercentileTrust",
    "Ramp",
    "Results",
    "Saturation",
    "Stats",
    "Target",
    "Totals",
    "Workload",
]


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
