"""What each face takes: one frozen config per face, built from the flags by the command layer (`tui.cli`,
the only code that sees the argparse namespace) and by tests directly, as posting's ``make_posting(...)``
takes typed inputs from its CLI and its tests alike. Plain data on `tui.engine.config` values; no face
imported. And `UsageError`, which a face raises for a value it cannot use, as the flag readers do."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tui.demo import DemoConfig
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig, normalise_base_url

if TYPE_CHECKING:
    from tui.engine.sessions.baseline import Baseline

ExportFormat = Literal["vllm", "csv", "llmd", "aiperf", "mooncake"]
"""The tools `tokentop export` writes for (`tokentop help exports`)."""
EXPORTS: tuple[ExportFormat, ...] = ("vllm", "csv", "llmd", "aiperf", "mooncake")


class UsageError(Exception):
    """A flag value that parsed but cannot be used; reported in one line, exit status 2. Here, beside the
    configs, so a face that refuses a value (an unwritable output) needs nothing of the flag readers."""


@dataclass(frozen=True)
class RunTarget:
    """The server a load face runs against: ``target`` as the flags gave it, or the built-in simulator
    (``demo``), whose URL is known once it runs (`at`)."""

    target: TargetConfig
    demo: DemoConfig | None = None
    note: str | None = None
    """One line saying the target came from ``$OPENAI_BASE_URL`` (never its credentials), or None."""

    def at(self, demo_url: str | None) -> TargetConfig:
        """The target to probe and load: the simulator's URL when tokentop started it."""
        if demo_url is None:
            return self.target
        return replace(self.target, base_url=normalise_base_url(demo_url))


AbMode = Literal["parallel", "alternate"]
"""How the load meets both endpoints: ``parallel`` runs each level against both at once, ``alternate``
against one at a time, in blocks that take turns."""


@dataclass(frozen=True)
class AbConfig:
    """``--ab``: a second endpoint (B) run beside the first (A) under the same load, judged level by level."""

    target: TargetConfig
    """B's server: its URL, model, key and headers; A's API, timeout, body and trust."""
    mode: AbMode = "parallel"
    threshold_pct: float = 10.0
    """The smallest change that is a verdict (`tui.engine.sessions.compare.THRESHOLD_PCT`)."""
    block_s: float = 10.0
    """``alternate``: the longest a side holds the load before the other's turn (each turn, in the app)."""


@dataclass(frozen=True)
class OwnMetrics:
    """tokentop's own Prometheus ``/metrics``, served by the face (``--serve-metrics-port``)."""

    port: int | None = None
    """None: not served."""
    host: str = "127.0.0.1"
    """The address to listen on: this machine only unless asked (``0.0.0.0`` for a Prometheus elsewhere)."""


@dataclass(frozen=True)
class BenchConfig:
    """`tokentop bench`: a sweep of load levels, each ended by a request count or a duration."""

    server: RunTarget
    workload: WorkloadConfig
    levels: tuple[LoadTarget, ...]
    """One per ``--concurrency`` or ``--rate`` value (a trace's speed), run in order."""
    options: EngineOptions = field(default_factory=EngineOptions)
    workers: int = 1
    requests: int | None = None
    """Requests per level counted in its steady window (None: `tui.bench.level_end.default_requests`)."""
    duration_s: float | None = None
    """Seconds per level instead of a request count."""
    level_durations_s: tuple[float, ...] | None = None
    """Each level's own time (``--schedule``: a session's levels as they were held), instead of either."""
    output: Path | None = None
    requests_log: Path | None = None
    vllm_results: Path | None = None
    csv: Path | None = None
    plot: Path | None = None
    quiet: bool = False
    live_jsonl: str | None = None
    """``--live-jsonl``: a path, or ``-`` for stdout, that follows the run line by line (`tui.bench.feed`)."""
    own_metrics: OwnMetrics = field(default_factory=OwnMetrics)
    ab: AbConfig | None = None
    """A second endpoint under the same levels (``--ab``), or None."""
    repeat: int = 1
    """Run the whole sweep this many times, each with its own outputs and session (`tui.bench.repeats`)."""
    fresh_prompts: bool = True
    """Each repeat draws its own prompt salt, so none meets a cache the one before warmed (False with
    ``--repeat-prompts``: every run sends those prompts)."""
    reset_cache_between_levels: bool = False
    """Ask the server to drop its prefix cache after each level's wind-down, so each level starts cold."""

    def level_duration_s(self, index: int) -> float | None:
        """How long level ``index`` (from 0) is held, or None when a request count ends it."""
        if self.level_durations_s is not None:
            return self.level_durations_s[index]
        return self.duration_s


@dataclass(frozen=True)
class LiveConfig:
    """`tokentop` (the live app): one engine whose load the keys change, from ``load`` at start."""

    server: RunTarget
    workload: WorkloadConfig
    load: LoadTarget
    options: EngineOptions = field(default_factory=EngineOptions)
    workers: int = 1
    theme: str | None = None
    """A theme's name or a theme file's path (None: the default)."""
    output: Path | None = None
    requests_log: Path | None = None
    schedule: tuple[tuple[float, LoadTarget], ...] = ()
    """(run seconds, target) to set after ``load`` in turn (``--schedule``); a load key ends it."""
    baseline: Baseline | None = None
    """Another run drawn beside this one (``--baseline``)."""
    own_metrics: OwnMetrics = field(default_factory=OwnMetrics)
    ab: AbConfig | None = None
    """A second endpoint under the same load (``--ab``, in parallel), judged level by level, or None."""


@dataclass(frozen=True)
class WatchConfig:
    """`tokentop watch`: no load, only the server's own ``/metrics`` (and a canary, if asked)."""

    target: TargetConfig
    options: EngineOptions
    note: str | None = None
    """One line saying the target came from ``$OPENAI_BASE_URL``, or None."""
    theme: str | None = None
    output: Path | None = None
    own_metrics: OwnMetrics = field(default_factory=OwnMetrics)


@dataclass(frozen=True)
class CalibrateConfig:
    """`tokentop calibrate`: how many streams of ``token_rate`` this machine times within the budget."""

    token_rate: float = 50.0
    """Tokens per second of each stream."""
    p99_budget_ms: float = 3.0
    """Largest client-added p99 ITL error counted as accurate."""
    workers: int = 1
    max_streams: int = 1024
    step_duration_s: float = 5.0
    """Seconds measured per stream count, after the warm-up."""
    lockstep: bool = False
    """Every stream emits at the same instant, like a batched server's decode step."""


@dataclass(frozen=True)
class SessionsConfig:
    """`tokentop sessions`: list the recorded sessions in ``folder``, newest last."""

    folder: Path


@dataclass(frozen=True)
class ReplayConfig:
    """`tokentop replay`: the live app's panes over a recorded session, no server."""

    session: Path
    theme: str | None = None
    """A theme's name or a theme file's path (None: the default)."""
    speed: float = 1.0
    """Play this many times faster than recorded."""


CompareForm = Literal["text", "markdown", "json"]
"""How `tokentop compare` prints: text tables and curves, a Markdown table, or JSON."""


@dataclass(frozen=True)
class CompareConfig:
    """`tokentop compare`: runs (sessions or results files) level by level against the first."""

    runs: tuple[tuple[Path, ...], ...]
    """At least two sides, the first the base; a side is one run or repeats of one command."""
    form: CompareForm = "text"
    threshold_pct: float = 10.0
    """The smallest change that is a verdict (`tui.engine.sessions.compare.THRESHOLD_PCT`)."""
    plot: Path | None = None
    """Also write both curves to this SVG."""
    notes: tuple[str, ...] = ()
    """A line per side given as one results file and taken as its ``bench --repeat`` set (or alone)."""


@dataclass(frozen=True)
class PlotConfig:
    """`tokentop plot`: the SVG plot of a saved run (a results file or a session)."""

    source: Path
    out: Path | None = None
    """Where the SVG goes (None: beside ``source``)."""


@dataclass(frozen=True)
class ExportConfig:
    """`tokentop export`: one export of a saved run for another tool."""

    source: Path
    to: ExportFormat
    out: Path | None = None
    """The file or folder written (None: beside ``source``, named by the export)."""
    append: bool = False
    """vLLM's ``--append-result`` layout: one line per level appended to one file (``to`` vllm only)."""
    requests_log: Path | None = None
    """The run's per-request records (``to`` aiperf needs them)."""
