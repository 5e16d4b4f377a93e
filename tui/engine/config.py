"""Frozen configuration passed from the CLI to the engine.

Plain, picklable data only: these cross the process boundary between the face (app or bench) and the
engine worker processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal
from urllib.parse import urlsplit

Endpoint = Literal["chat", "completions", "responses", "messages", "embeddings"]
"""The API a target speaks (``--api``): OpenAI chat and completions, OpenAI Responses, Anthropic Messages,
and embeddings (answered whole, not streamed)."""
APIS: tuple[Endpoint, ...] = ("chat", "completions", "responses", "messages", "embeddings")
API_PATHS: dict[str, str] = {
    "chat": "/chat/completions",
    "completions": "/completions",
    "responses": "/responses",
    "messages": "/messages",
    "embeddings": "/embeddings",
}
"""Each API's standard path under the base URL (``/v1``)."""
MESSAGES_APIS: tuple[Endpoint, ...] = ("chat", "responses", "messages")
"""The APIs that take chat messages (a conversation, a dataset of them)."""
LoadMode = Literal["concurrency", "rate", "trace"]
Arrival = Literal["poisson", "constant"]


@dataclass(frozen=True)
class TargetConfig:
    """Where the load goes and how each request is shaped on the wire."""

    base_url: str
    """Server base URL, normalised to end in `/v1` (the user may give it with or without); with
    `endpoint_path`, the URL as given (nothing added: a server off `/v1` is not guessed at)."""
    model: str | None = None
    """Model name; None means ask `/v1/models` and take the first."""
    endpoint: Endpoint = "chat"
    """The API, which shapes the body, the headers and the events (``--api``)."""
    endpoint_path: str | None = None
    """The request path joined to `base_url` (``--endpoint /api/v2/chat``, as ``vllm bench serve`` joins
    ``--base-url`` and ``--endpoint``); None: the API's own path under ``/v1``."""
    api_key: str | None = field(default=None, repr=False)
    """Secret: never printed, logged or written to results (repr=False keeps it out of reprs)."""
    headers: tuple[tuple[str, str], ...] = ()
    extra_body: tuple[tuple[str, object], ...] = ()
    """Extra JSON fields merged into every request body (from `--extra-body`)."""
    timeout_s: float = 300.0
    """Per request: the whole request and also the longest silence allowed between two chunks."""
    connect_timeout_s: float = 10.0
    ca_cert: str | None = None
    """A PEM bundle that replaces the default store to verify the server by (``--ca-cert``)."""
    insecure: bool = False
    """Do not verify the server's certificate at all (``--insecure``)."""
    trust_env: bool = True
    """Honour the environment as httpx does: ``HTTP(S)_PROXY``/``ALL_PROXY``/``NO_PROXY`` and, unless
    `ca_cert` is given, ``SSL_CERT_FILE``/``SSL_CERT_DIR`` (``--no-trust-env`` turns it off)."""
    demo: bool = False
    """True when the target is the built-in simulator started by tokentop itself."""


@dataclass(frozen=True)
class WorkloadConfig:
    """What each request asks for: the settings of the synthetic workload, which
    `tui.engine.workload.build_workload` turns into the `Workload` each engine worker asks per request."""

    isl: int = 128
    """Approximate input (prompt) tokens per request."""
    osl: int = 128
    """Output tokens per request: sets `max_tokens`, plus `ignore_eos`/`min_tokens` when `fixed_osl`."""
    fixed_osl: bool = True
    """Ask the server to ignore EOS so every request generates exactly `osl` tokens."""
    seed: int = 0
    prompt_salt: str = ""
    """Drawn afresh for each run (`tui.engine.workload.text.new_salt`): the first words of every prompt, and
    the shared prefix, are drawn from it, so no earlier run's prefix cache can serve this run's prompts; the
    lengths and the rest of the text follow ``seed`` alone. "" is no salt; an earlier run's salt sends
    exactly that run's prompts (``--repeat-prompts``)."""
    # --- shaped workloads: each left at its default keeps the plain synthetic prompts ---
    isl_dist: LengthDist | None = None
    """Input length per request drawn from this (instead of ``isl``)."""
    osl_dist: LengthDist | None = None
    """Output length per request drawn from this (instead of ``osl``)."""
    scenarios: tuple[Scenario, ...] = ()
    """Weighted (ISL, OSL) pairs, one drawn per request (instead of ``isl``/``osl`` and the dists)."""
    dataset: DatasetConfig | None = None
    """Prompts from a file instead of synthetic ones."""
    shared_prefix: int = 0
    """Every prompt starts with the same text of this many tokens (by the server's count once probed, or by
    the tokenizer), added to the prompt's own ``isl``: the ISL is ``shared_prefix + isl``, as vLLM's
    ``--random-prefix-len``."""
    turns: int = 1
    """Closed loop: each user carries a conversation this many turns (history grows with the replies)."""
    # --- exact input lengths (see `tui.engine.workload.synthetic.IslCalibrator`) ---
    trace: TraceConfig | None = None
    """Replay a trace file: its requests' lengths (and, with the load's ``trace`` mode, its timing)."""
    isl_observations: tuple[tuple[int, int], ...] = ()
    """(words sent, ``usage.prompt_tokens`` measured) pairs from a probe before the run
    (`tui.engine.host.isl_probe`): each worker starts its ISL calibration from them."""
    tokenizer: str | None = None
    """A local ``tokenizer.json`` (``--tokenizer``): prompts are cut to the exact token count by it."""
    shared_prefix_sized: tuple[int, int] | None = None
    """(words, prompt tokens the server counted for them): the word count the ISL probe found to cost
    ``shared_prefix`` tokens (`tui.engine.host.isl_probe`); None: cut by the tokenizer, or ``shared_prefix``
    words (no probe)."""


LengthKind = Literal["fixed", "normal", "uniform"]


@dataclass(frozen=True)
class LengthDist:
    """A distribution of token counts. ``fixed``: always ``lo``; ``normal``: mean/stddev, redrawn when outside
    [lo, hi]; ``uniform``: every whole number in [lo, hi] alike."""

    kind: LengthKind
    lo: int
    hi: int
    mean: float = 0.0
    stddev: float = 0.0


@dataclass(frozen=True)
class Scenario:
    """One (ISL, OSL) pair of a weighted scenario list."""

    isl: int
    osl: int
    weight: float = 1.0


DatasetFormat = Literal["jsonl", "sharegpt", "text"]
DatasetOrder = Literal["sequential", "shuffle"]


@dataclass(frozen=True)
class DatasetConfig:
    """A prompt file the face has loaded and validated. Only its name and fingerprint cross the process
    boundary: each worker re-reads it (`tui.engine.workload.dataset`) and refuses one that changed since."""

    path: str
    format: DatasetFormat | None = None
    """None until the face has sniffed it."""
    order: DatasetOrder = "sequential"
    entries: int = 0
    """How many prompts the face's validation found."""
    chat: bool = False
    """Some entry is chat messages (they need the chat endpoint)."""
    size_bytes: int = 0
    """The file's size when checked: a worker that finds another refuses it."""


TraceFormatName = Literal["mooncake", "azure", "burstgpt"]
TraceTimeUnit = Literal["s", "ms", "us", "ns"]
TIME_UNIT_NS: dict[str, int] = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


@dataclass(frozen=True)
class TraceConfig:
    """A trace file the face has opened and checked (`tui.engine.traces.check_trace`). Only its name and
    settings cross the process boundary: each worker streams the file itself, never loading it whole."""

    path: str
    format: TraceFormatName | None = None
    """None until the face has sniffed it from the name and first line."""
    block_size: int = 512
    """Tokens per Mooncake ``hash_ids`` block (Mooncake's 512; Alibaba's Bailian traces use 16)."""
    start_s: float = 0.0
    """Skip the trace's first this many seconds (from its first timestamp)."""
    duration_s: float | None = None
    """Replay only this many seconds of it from ``start_s``; None: to the end."""
    loop: bool = False
    """Start over at the end (the next pass one mean gap after the last request)."""
    model: str | None = None
    """BurstGPT: keep only this model's requests (``Model`` column, case-insensitive)."""
    time_unit: TraceTimeUnit | None = None
    """What a number in the timestamp column counts; None: the format's own (Mooncake ms, BurstGPT s)."""
    size_bytes: int = 0
    """The file's size when checked: a worker that finds another refuses it."""


@dataclass(frozen=True)
class LoadTarget:
    """The load the user asked for. Keys change the target; the engine reconciles toward it."""

    mode: LoadMode = "concurrency"
    concurrency: int = 1
    """Closed loop: number of users, each sending its next request when its last one ends."""
    rate: float = 1.0
    """Open loop: requests per second offered."""
    arrival: Arrival = "poisson"
    max_concurrency: int | None = None
    """Open loop: cap on in-flight requests (arrivals beyond it wait, and their lag is recorded)."""
    paused: bool = False
    speed: float = 1.0
    """Trace replay: the trace's gaps divided by this (2: twice as fast)."""
    from_start: bool = False
    """Trace replay: a new level with this target plays the trace from its start again (bench's sweep);
    False: it goes on from where the replay is (the live knob)."""

    @property
    def value(self) -> float:
        """The number that the load level is named by: users, req/s or the trace's speed-up."""
        if self.mode == "trace":
            return self.speed
        return float(self.concurrency) if self.mode == "concurrency" else self.rate

    def label(self) -> str:
        if self.mode == "concurrency":
            return f"concurrency {self.concurrency}"
        if self.mode == "trace":
            return f"trace x{self.speed:g}"
        return f"rate {self.rate:g}/s"

    def with_value(self, value: float) -> LoadTarget:
        """Same mode, new level; concurrency is clamped to >= 0 users, rate to >= 0 req/s, speed above 0."""
        if self.mode == "concurrency":
            return replace(self, concurrency=max(0, round(value)))
        if self.mode == "trace":
            return replace(self, speed=max(0.001, round(value, 3)))
        return replace(self, rate=max(0.0, round(value, 3)))


NodeLossPolicy = Literal["stop", "continue"]


@dataclass(frozen=True)
class RayPlacement:
    """Engine workers on a Ray cluster (`tui.engine.host.ray_pool`) instead of local processes."""

    address: str = "auto"
    """``auto`` (Ray's own discovery), ``host:port``, or ``ray://host:10001`` (Ray Client)."""
    per_node: int | None = None
    """Workers per node; the total is then this times the nodes used (None: ``workers`` over the nodes)."""
    head_workers: bool = False
    """Also place workers on the node the face runs on (by default none, when other nodes exist)."""
    on_node_loss: NodeLossPolicy = "stop"
    """``stop``: the run ends (results saved, interrupted by ``node_lost``); ``continue``: the load is split
    again over the workers left, as a new level."""
    silent_after_s: float = 2.0
    """A node whose collect call has not come back for this long is reported silent ..."""
    lost_after_s: float = 5.0
    """... and lost after this long (or at Ray's own error, if sooner)."""
    dead_after_s: float = 5.0
    """A node's workers stop by themselves when its agent has not been collected from for this long."""
    test_clock_offset_ns: int = 0
    """Tests only: the agents' clocks read this far ahead, as another machine's would."""


@dataclass(frozen=True)
class EngineOptions:
    """Engine tunables a face may set (all optional; plain data, passed to the worker processes too)."""

    transport: str | None = None
    """HTTP transport under httpx: "aiohttp" (default) or "httpx"; None reads $TOKENTOP_TRANSPORT."""
    user_stagger_s: float = 0.005
    """Closed loop: new users start this far apart (0: all at once, as LLMPerf does) ..."""
    user_stagger_max_s: float = 1.0
    """... and one change of concurrency starts all its new users within this long (the step shrinks)."""
    batch_interval_s: float = 0.1
    """How often each worker sends what it measured."""
    lag_threshold_ms: float | None = None
    """`ClientHealth.saturated` when a worker's event-loop lag p99 exceeds this (None: from this machine, a
    multiple of the lag each worker measures with no load at start) ..."""
    cpu_threshold: float = 0.6
    """... or its CPU share exceeds this fraction of one core, sustained: in two consecutive health windows
    (`tui.engine.aggregate.saturation.Sustain`)."""
    health_window_s: float = 2.0
    """Length of the disjoint windows a worker judges its health over (lag p99 and CPU share of each)."""
    slo_ttft_ms: float | None = None
    """Goodput counts requests meeting every SLO given."""
    slo_tpot_ms: float | None = None
    slo_e2e_ms: float | None = None
    slo_target: float = 0.95
    """The auto ramp's capacity at SLO: the highest load whose attainment's lower bound reaches this."""
    cost_per_hour: float | None = None
    """What the server costs per hour (USD: GPUs, instance): each level's $ per million tokens; None: none."""
    max_lanes: int = 64
    """Most lanes a snapshot carries (the rest are counted in `Snapshot.lanes_hidden`)."""
    server_metrics: bool = True
    """Scrape the server's Prometheus ``/metrics`` beside the load (in the face process, never a worker)."""
    metrics_url: str | None = None
    """Where to scrape; None: ``/metrics`` beside the base URL's ``/v1``."""
    metrics_interval_s: float = 1.0
    """Seconds between two scrapes (the next starts after the last ended; they never overlap)."""
    server_metrics_log: str | None = None
    """A path that gets one JSON line per scrape (appended), for plots after the run."""
    canary_rate: float | None = None
    """One-token requests per second sent beside the load and never counted in it (`host.canary`): the
    TTFT a new user would see now."""
    gpu_metrics: str | None = None
    """The GPU beside the server: a DCGM exporter's URL, or `nvml` (this host's GPUs); None: only what the
    server's own /metrics serves of DCGM's names."""
    isl_probe: bool = False
    """Before the workers start, send a few one-token requests to learn how many prompt tokens the server
    counts for the synthetic prompt (chat template included), so the first requests hit ``--isl`` too."""
    reset_cache: bool = False
    """Before the workers start (after the ISL probe), ask the server to drop its prefix cache
    (`tui.engine.host.cache_reset`), so the run starts cold."""
    test_block_loop_ms: float = 0.0
    """Tests only: block each worker's event loop this long every batch (starves the engine on purpose)."""
    test_block_loop_idle: bool = False
    """Tests only: block it by sleeping rather than spinning, so the loop lags while the worker uses almost no
    CPU (how a worker sees a machine whose cores other processes hold)."""
    placement: RayPlacement | None = None
    """Where the workers run: None, local processes; else on a Ray cluster."""
    on_worker_loss: NodeLossPolicy = "stop"
    """Local workers (no ``placement``): what one killed by a signal (the kernel's OOM killer, ``kill -9``)
    does to the run, as ``RayPlacement.on_node_loss`` for a lost node (``--on-node-loss``)."""
    record: str | None = None
    """Where the handle records the run's session (`tui.engine.sessions`); None: not recorded."""
    record_text: bool = False
    """The session keeps the streamed text too (a replay then draws the lanes' text)."""
    record_label: str = ""
    """The session's label (``--label``), shown by ``tokentop sessions`` and in its file name."""
    otlp_endpoint: str | None = None
    """An OTLP/HTTP collector's base URL (``--otlp-endpoint``): a span per finished request goes to its
    ``/v1/traces`` (`tui.engine.telemetry.otlp`); None: none."""
    trace_key: str = ""
    """Drawn afresh per run with ``otlp_endpoint``: each request's W3C ``traceparent`` ids derive from it,
    its worker and its sequence number (`tui.engine.trace_context`), so the face names the same span from the
    record alone. "": no ``traceparent`` is sent."""
    record_repeat: str = ""
    """The set of repeated runs this session is one of (``bench --repeat``), alike in each: `tokentop
    compare` takes them all as one side when named by their label; "" for a single run."""
    repeat_of: tuple[str, int, int] | None = None
    """``bench --repeat``: (the set's id, this run, of how many), saved in the results' ``repeat``, so
    `tokentop compare` given one results file of the set takes the set; None for a single run."""


def normalise_base_url(url: str, *, add_v1: bool = True) -> str:
    """Accept `http://host:port`, `.../v1` or `.../v1/`; return `.../v1` without a trailing slash (with
    ``add_v1=False``, for a target with its own request path: the URL as given, without a trailing slash).

    Raises `ValueError` with a one-line reason for a URL no request could use (no host, a port that is not
    a number in 1..65535, a space in the host): found here, before any load, instead of as a traceback from
    the HTTP stack on the first request."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"URL must start with http:// or https://: {url!r}")
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]  # credentials are refused elsewhere, never echoed here
    host = parts.hostname or ""
    if not host or any(c.isspace() for c in netloc):
        raise ValueError(f"URL has no usable host: {_without_credentials(url)!r}")
    try:
        port = parts.port
    except ValueError:
        port_text = netloc.rpartition("]")[2].rpartition(":")[2]
        raise ValueError(f"URL port must be a number in 1..65535, got {port_text!r}") from None
    if port == 0 or netloc.endswith(":"):
        raise ValueError(f"URL port must be a number in 1..65535, got {netloc.rpartition(':')[2]!r}")
    if add_v1 and not url.endswith("/v1"):
        url += "/v1"
    return url


def _without_credentials(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    return scheme + sep + netloc.rpartition("@")[2] + slash + path
