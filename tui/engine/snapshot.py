"""What a face (the live app or the headless bench) sees of the engine: immutable plain data.

A `Snapshot` is computed by the engine handle from the raw records it has read, on demand, and
is cheap to render. No numpy arrays, no live objects: tuples, floats, ints, strings.
Latencies are in milliseconds (`_ms`), rates per second (`_per_s`), times since run start in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tui.engine.config import LoadMode, LoadTarget

ItlConvention = Literal["chunk", "tpot", "e2e"]
"""Which inter-token latency a figure uses:
- `chunk`: gap between consecutive content chunks (vLLM/SGLang `itl`);
- `tpot`: (E2E - TTFT) / (OSL - 1), excludes TTFT (vLLM `tpot`, GenAI-Perf/AIPerf "ITL");
- `e2e`: E2E / OSL, includes TTFT (LLMPerf's inter-token latency).
"""
ITL_CONVENTIONS: tuple[ItlConvention, ...] = ("chunk", "tpot", "e2e")
ITL_NAMES: dict[ItlConvention, str] = {
    "chunk": "ITL per chunk gap (vLLM/SGLang itl)",
    "tpot": "TPOT (E2E-TTFT)/(OSL-1) (vLLM tpot, AIPerf ITL)",
    "e2e": "E2E/OSL incl. TTFT (LLMPerf ITL)",
}

WINDOWS_S: tuple[float | None, ...] = (10.0, 30.0, 60.0, None)
"""Rolling windows offered to the user; None is the whole run."""

LaneState = Literal["waiting", "streaming", "ok", "error", "cancelled"]


@dataclass(frozen=True)
class Stats:
    """Summary of one metric over a set of samples (ms for latencies)."""

    n: int = 0
    mean: float = float("nan")
    std: float = float("nan")
    min: float = float("nan")
    max: float = float("nan")
    p50: float = float("nan")
    p90: float = float("nan")
    p95: float = float("nan")
    p99: float = float("nan")
    intervals: tuple[tuple[float, float] | None, ...] = ()
    """95 % interval of p50, p90, p95, p99 in that order, None where it cannot be bounded yet (too few
    samples: `tui.engine.aggregate.intervals`); empty without samples."""

    def interval(self, q: str) -> tuple[float, float] | None:
        """Percentile ``q``'s ("p99") interval, None without one."""
        i = ("p50", "p90", "p95", "p99").index(q)
        return self.intervals[i] if i < len(self.intervals) else None

    def unbounded(self, q: str) -> bool:
        """Percentile ``q`` was judged and has too few samples for an interval: shown with ``~``. (Stats
        made without intervals, a hand-made one, are not judged.)"""
        return bool(self.intervals) and self.interval(q) is None


@dataclass(frozen=True)
class Histogram:
    """Counts over fixed, log-spaced bin edges (ms), so the axis does not jump between frames."""

    edges_ms: tuple[float, ...] = ()
    """len(counts) + 1 edges."""
    counts: tuple[int, ...] = ()
    stats: Stats = field(default_factory=Stats)


@dataclass(frozen=True)
class LaneView:
    """One request's lane in the token-stream pane."""

    request_id: int
    level_id: int
    state: LaneState
    text_tail: str
    """The last few hundred characters of the answer text (``content``)."""
    output_tokens: int
    age_s: float
    ttft_ms: float | None
    tokens_per_s: float | None
    error: str | None = None
    reasoning_tail: str = ""
    """The end of the reasoning text, as much as fits before `text_tail` in the same few hundred characters
    (all of them while no answer has come): the reasoning precedes the answer."""
    side: str = ""
    """Which endpoint's request, "A" or "B", where a face shows two (``--ab``); "" with one."""


@dataclass(frozen=True)
class RequestDetail:
    """A finished or in-flight request opened for inspection (in flight: the figures so far; the TPOT with
    the latest chunk standing in for the end, and no E2E)."""

    request_id: int
    level_id: int
    state: LaneState
    sent_s: float
    ttft_ms: float | None
    e2e_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    token_source: str
    """Where the token counts came from: `usage`, `chunks` (one per content chunk) or `estimate`."""
    chunk_offsets_ms: tuple[float, ...]
    """Arrival of each content chunk relative to send."""
    chunk_tokens: tuple[int, ...]
    itl_chunk: Stats
    tpot_ms: float | None
    http_status: int | None
    error_class: str | None
    error: str | None
    text: str
    chunks_dropped: int = 0
    """Earlier chunks left out of the timeline: an in-flight request keeps only its latest chunk stamps
    (`tui.engine.aggregate.lanes.LANE_CHUNKS`), so ``chunk_offsets_ms[0]`` is chunk number
    ``chunks_dropped``."""


@dataclass(frozen=True)
class SloView:
    """A level's SLO attainment (`tui.engine.aggregate.attainment`): of the window's requests (the successful
    ones the latencies count, and the failed ones, which count against), those meeting every objective."""

    met: int
    requests: int
    """Successful and failed requests of the window: the attainment's denominator."""
    cut: int
    """Requests of the level cut short (cancelled): counted apart, in no share."""
    attainment: float
    """``met / requests``; NaN with no request yet."""
    low: float
    high: float
    """Wilson's 95 % interval of the attainment."""
    goodput_rps: float
    goodput_tps: float
    """Requests/s and output tokens/s of the requests that met the SLO, over the window; NaN where the
    window is too short to measure."""


ClientSign = Literal["cpu", "loop_lag", "in_flight", "send_lag"]
"""A sign that the client limited a level's load: a worker CPU-bound; answers read late by a material share
of their E2E; a closed loop's users not all in flight; an open loop's sends falling behind their schedule."""


@dataclass(frozen=True)
class ClientEvidence:
    """What the client-limit judgement read over a level's window (`tui.engine.aggregate.saturation`), and
    which of it showed the client limiting the load (``limited_by``, empty when it did not)."""

    cpu_share: float
    """The worst worker's median CPU share over the window (0..1 of a core)."""
    mean_lag_ms: float
    """Likewise its mean loop lag: how long an answer that ended waited to be read."""
    e2e_p50_ms: float
    in_flight: float | None = None
    """Closed loop: requests in flight averaged over the window, all workers (None: not judged)."""
    users: float | None = None
    """What ``in_flight`` is set against (None: not judged, e.g. failures held users back)."""
    send_shortfall: float | None = None
    """Open loop without a cap: the share of its schedule the sends fell behind (None: not judged)."""
    limited_by: tuple[ClientSign, ...] = ()


@dataclass(frozen=True)
class LevelView:
    """Everything measured at one load level (one row of the table, one point of the curve)."""

    level_id: int
    mode: LoadMode
    value: float
    """Concurrency (users) or offered rate (req/s)."""
    started_s: float
    ended_s: float | None
    """None while this is the current level."""
    steady_from_s: float | None
    """Start of the steady-state window (transient after the load change excluded); None until settled."""
    steady: bool
    """True once the steady window holds enough data to be trusted."""
    completed: int
    failed: int
    output_tps: float
    """System output tokens/s over the steady window (or over the level if not yet steady); NaN when the
    window is too short to measure (`too_short`)."""
    request_per_s: float
    per_request_tps: float
    """Median over requests of (OSL - 1) / (E2E - TTFT), i.e. 1000 / TPOT: per-user decode tokens/s."""
    ttft: Stats
    tpot: Stats
    itl_chunk: Stats
    itl_e2e: Stats
    e2el: Stats
    tokens_per_chunk: float
    sched_lag: Stats
    errors: tuple[tuple[str, int], ...] = ()
    # --- added by the engine (defaults keep older constructors working) ---
    window_s: float = 0.0
    """Length of the window the throughputs are measured over (the steady window once there is one)."""
    window_from_s: float | None = None
    window_to_s: float | None = None
    window_completed: int = 0
    """Successful requests sent from the window start on (the population of the latency stats)."""
    window_failed: int = 0
    input_tokens: int = 0
    """Input tokens of the window's population (server usage, else the estimate)."""
    output_tokens: int = 0
    total_tps: float = float("nan")
    """Output tokens/s plus input tokens (of requests sent in the window) per second."""
    output_tps_ci: tuple[float, float] | None = None
    """``output_tps``'s 95 % interval, from a bootstrap over the window's seconds
    (`tui.engine.aggregate.intervals`); None for a window of fewer than 4 whole seconds."""
    goodput_per_s: float | None = None
    """Requests/s meeting every SLO given (None without SLOs): ``slo.goodput_rps``."""
    slo: SloView | None = None
    """The SLO attainment of the window's requests (None without SLOs)."""
    in_flight: int = 0
    settled: bool = False
    """The level has ended and every request of it and of earlier levels is known: nothing here changes
    any more (a level's figures stop changing only then, not when it ends: its last requests finish later)."""
    exact: bool = True
    """False once the level outgrew its exact sample caps and its latency stats come from a reservoir."""
    too_short: bool = False
    """The window is too short to measure (`tui.engine.aggregate.levels.MIN_WINDOW_S`): the rates are NaN
    and a face shows none (no table figure, no curve point)."""
    # --- lengths and reasoning ---
    mean_isl: float = float("nan")
    """Achieved mean input tokens per request of the window's population (server usage, else the estimate):
    compare with the ``--isl`` asked for."""
    mean_osl: float = float("nan")
    """Achieved mean output tokens per request of the window's population: compare with ``--osl``."""
    ttfa: Stats = field(default_factory=Stats)
    """Time to first *answer* token (first ``content`` chunk, after any reasoning); TTFT on a model that
    does not reason."""
    reasoning_tokens: float = float("nan")
    """Mean reasoning tokens per request where the server reports them (they are part of the OSL)."""
    # --- prefix cache ---
    cached_tokens: int | None = None
    """Prompt tokens of the window's population the server served from its prefix cache
    (``usage.prompt_tokens_details.cached_tokens``); None when it reported none."""
    cache_hit_rate: float | None = None
    """``cached_tokens`` / prompt tokens of the requests that reported it; None when none did."""
    warm_cache: bool = False
    """Prompts asked to share no prefix were served from the prefix cache beyond what the chat template
    explains (`tui.engine.control.checks.unexpected_hits`): a warm cache's TTFT. Set by the run's checks."""
    dropped: int = 0
    """Open-loop arrivals due while the server's failures held the arrivals, never sent (not in ``failed``;
    `tui.engine.load.backoff.ArrivalGate`)."""
    measured_over: Literal["requests", "arrivals"] = "requests"
    """``requests``: the window ends before every unfinished request, so each figure is over whole requests
    sent in it; ``arrivals``: answers outlive that window, so the window runs to the level's end and
    throughput, TTFT and chunk ITL count what arrived in it from every stream (manual: ``live``)."""
    in_flight_at_end: int = 0
    """Streams of the level unfinished when its figures were taken (in flight, or cancelled at quit)."""
    partial_output_tokens: int = 0
    """Output tokens in the window from streams that had not finished (counted in ``output_tps``)."""
    finished_in_window: int = 0
    """Successful requests that ended inside the window: the population of E2E, TPOT and E2E/OSL."""
    ttft_since_s: float | None = None
    """Over arrivals, where the TTFT population starts: the window's start, or the level's (when no first
    token arrived inside the window: answers longer than the window start no new request in a closed loop)."""
    coalesced_gaps: int = 0
    """Chunk gaps of 0 in the window: chunks that came in one read of the socket, stamped alike. They make
    ITL p50 0.00 ms when many chunks share reads: a fact about the client's reads, not the server."""
    client_limited: bool = False
    """The client limited the load over this level's window (a worker CPU-bound, or its loop lag a material
    share of the median E2E: `tui.engine.aggregate.saturation`): its figures show the client's limit, not the
    server's, so it is never the knee nor the plateau proving one."""
    client_lag_ms: float | None = None
    """The client's timing bound over the window: its loop lag p99 (every stamp up to this late; ``±``)."""
    timing_uncertain: tuple[str, ...] = ()
    """``name_pNN`` of the latency figures the bound is a material share of
    (`tui.engine.aggregate.saturation.uncertain_figures`)."""
    client_limit_cause: Literal["cpu", "machine", "unclear"] | None = None
    """Why, when ``client_limited``: the workers' own CPU (more workers help), a machine busy with other work
    (the loop lagged at a low CPU share: more workers would not help), or unclear
    (`tui.engine.aggregate.advice.cause_of`)."""
    client_evidence: ClientEvidence | None = None
    """What the client-limit judgement read over the window and what of it showed the limit."""
    send_shortfall: float | None = None
    """Open loop (rate, trace) without a cap: how far the sends fell behind their schedule over the window,
    as a share of it (`tui.engine.aggregate.saturation.send_shortfall`); None otherwise or too few sends."""
    workers_lost: int = 0
    """Engine workers lost during the level (their node went away): the window ends at the loss."""
    down_s: float = 0.0
    """Seconds of the window the server was not answering (`Outage`): the rates are over the rest, and a
    level that held an outage is not steady."""

    @property
    def input_tps(self) -> float:
        """Input tokens/s of the requests sent in the window (``total_tps`` less the output): an embeddings
        run's throughput."""
        return self.total_tps - self.output_tps

    def span_s(self, now_s: float) -> tuple[float, float] | None:
        """The run seconds the level's figures cover: its steady window, else its whole span (to ``now_s``
        while it runs). The server's own figures per level are averaged over exactly this. None: empty."""
        if (
            self.window_from_s is not None
            and self.window_to_s is not None
            and self.window_to_s > self.window_from_s
        ):
            return self.window_from_s, self.window_to_s
        end_s = self.ended_s if self.ended_s is not None else now_s
        return (self.started_s, end_s) if end_s > self.started_s else None


@dataclass(frozen=True)
class Knee:
    """Where throughput stops growing: see `tui.engine.aggregate.metrics.find_knee` for the rule."""

    level_id: int
    value: float
    output_tps: float
    peak_tps: float
    rule: str


RampStop = Literal["knee", "slo", "errors", "client", "limit", "fatal"]
"""Why the auto ramp stopped: a knee, a broken SLO, errors, the client as the limit, its highest load, or
the engine stopped."""


@dataclass(frozen=True)
class RampVerdict:
    """What the auto ramp said when it stopped (`tui.engine.control.ramp`): the one line a face shows and the
    results record, and the figures it quotes, taken once its levels had ended and settled, so the saved
    levels hold the same figures."""

    stopped_by: RampStop
    reason: str
    """The line, e.g. "knee at 4 users: 176 of a 201 tok/s peak"."""
    mode: Literal["concurrency", "rate", "trace"]
    level_ids: tuple[int, ...]
    """The levels the ramp ran, the only ones its knee and peak are taken from."""
    stopped_at_level_id: int | None
    """The level it stopped at (None: it stopped before running one)."""
    knee: Knee | None
    peak_tps: float | None
    """The best steady output tokens/s among its levels where the client was not the limit."""
    peak_level_id: int | None
    settled: bool
    """Every level it ran had ended and all their requests were in when it quoted; False after a wait
    bounded by `tui.engine.control.ramp.SETTLE_LIMIT_S`, or when the engine stopped."""
    capacity_level_id: int | None = None
    """With an SLO: the highest load whose attainment's lower bound reached the target (None: none did)."""
    capacity_value: float | None = None
    capacity_goodput_tps: float | None = None


@dataclass(frozen=True)
class ClientHealth:
    """Is the load generator itself keeping up? Measured in each engine process."""

    workers: int = 1
    loop_lag_p99_ms: float = 0.0
    """Highest event-loop lag p99 among engine processes over the last few seconds."""
    cpu_share: float = 0.0
    """Highest CPU share (0..1 of one core) among engine processes over the last few seconds."""
    saturated: bool = False
    """Sustained: some engine process's lag p99 or CPU share was over its threshold in two consecutive
    health windows (`tui.engine.aggregate.saturation.Sustain`); a momentary high reading above does not
    set it."""
    reason: str = ""
    worker_tasks: int = 0
    """Asyncio tasks alive in all workers at their latest health windows (a leak shows as growth)."""


@dataclass(frozen=True)
class Outage:
    """A span the server did not answer (every request refused, reset or answered 502/503)."""

    start_s: float
    """Run seconds when the first of its failures ended."""
    end_s: float | None
    """Run seconds of the first answer after it; None while it lasts."""
    cause: str
    """What the failures were: "connect", "disconnect", "HTTP 503"."""


@dataclass(frozen=True)
class Snapshot:
    """The whole state a face renders, at one instant."""

    seq: int
    elapsed_s: float
    base_url: str
    model: str
    endpoint: str
    demo: bool
    load: LoadTarget
    level_id: int
    in_flight: int
    completed: int
    failed: int
    output_tps: float
    """Rolling system output tokens/s over the last few seconds (the live gauge)."""
    request_per_s: float
    lanes: tuple[LaneView, ...] = ()
    lanes_hidden: int = 0
    ttft_hist: dict[float | None, Histogram] = field(default_factory=dict)
    """Keyed by window (seconds, or None for all)."""
    itl_hist: dict[tuple[ItlConvention, float | None], Histogram] = field(default_factory=dict)
    """Keyed by (convention, window)."""
    levels: tuple[LevelView, ...] = ()
    knee: Knee | None = None
    errors: tuple[tuple[str, int], ...] = ()
    """Counts by error class over the run."""
    recent_errors: tuple[str, ...] = ()
    """Last few error messages, newest last, one line each."""
    health: ClientHealth = field(default_factory=ClientHealth)
    fatal: str | None = None
    """Set when the engine cannot go on (e.g. server unreachable at start): a one-line reason."""
    cancelled: int = 0
    """Requests cut off by a stop (neither completed nor failed)."""
    skipped_lines: int = 0
    """Malformed stream lines skipped over the run: their streams went on, so they are not failures."""
    outages: tuple[Outage, ...] = ()
    """The spans the server stopped answering, oldest first (the last one open while it lasts)."""
    notices: tuple[str, ...] = ()
    """One-line warnings of the run, each once (a server that rejected the fixed-OSL fields, a level whose
    achieved ISL/OSL is off what was asked): a face shows them beside the errors."""
    e2e_hist: Histogram = field(default_factory=Histogram)
    """E2E of the successful requests over the whole run (tokentop's own ``/metrics``)."""
    input_tokens: int = 0
    output_tokens: int = 0
    """Tokens of the successful requests so far, as their levels count them (usage, else the estimate)."""
