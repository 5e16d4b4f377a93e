"""Is the load generator keeping up? The face's judgement of the health readings its workers send.

Each worker measures itself (`tui.engine.load.health`: event-loop lag, CPU share) and sends two kinds of
reading: rolling ones in every batch (for display and the run's maxima) and one per disjoint health window,
which `Sustain` turns into the live flag. This module keeps those per worker, the run's maxima and the spans
of run time when some worker was flagged, and turns them into `ClientHealth` (the advice wording is
`tui.engine.aggregate.advice`'s).

Two different things come out of the same readings, per level (`Saturation.level_client`):
- *the client limits the load* (a verdict: the level's throughput is the client's, no knee from it) when it
  could not send or read on time, each sign a material share (`MATERIAL_SHARE`): a worker was CPU-bound
  (its CPU share over the CPU threshold); in a closed loop (or a capped open one), its mean loop lag was
  that share of the level's median E2E (each answer that ended waited that long to be read, the server
  holding that much less load), or its users were not all in flight; in an uncapped open loop, its sends
  fell behind their schedule (`send_shortfall`). A lag alone does not cut an open loop's load: its
  arrivals keep their schedule;
- *the client's timestamps are uncertain* (an error bar, not a verdict): the loop lag p99 over the level is
  a bound on how late any stamp was (``± lag``); a latency figure is flagged only where that bound is a
  material share of it (`uncertain_figures`).
The lag threshold of the live flag comes from this machine: each worker measures its loop with no load at
start (`tui.engine.load.health.IDLE_PROBE_S`), and the threshold is `LAG_OVER_IDLE` times that, within
`LAG_MIN_MS` .. `LAG_MAX_MS` (a fixed ``lag_threshold_ms`` overrides it).
"""

from __future__ import annotations

import math
import os
import statistics
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from tui.engine.aggregate.advice import (
    Cause,
    cause_of,
    client_limit,
    evidence_words,
    load_at,
    saturation_advice,
)
from tui.engine.snapshot import ClientHealth, ClientSign, LevelView, Stats
from tui.engine.wire import Health

SUSTAIN_WINDOWS = 2
"""Consecutive over-threshold health windows that make a worker saturated."""
SATURATED_SPANS = 100
"""Saturated spans kept (the latest)."""
MATERIAL_SHARE = 0.05
"""A lag bound (p99) this share of a latency figure or more makes it uncertain, and a mean lag this share of
a level's median E2E makes the level the client's: 5 %, the knee's own tolerance (a load or a figure off by
less cannot move a knee). GuideLLM warns at 1 % of TTFT; here a machine's ordinary 0.5 ms lag would then
flag every 20 ms ITL."""
LAG_OVER_IDLE = 4.0
"""The live flag's lag threshold is this many times the lag p99 the worker measured with no load ..."""
LAG_MIN_MS = 1.0
"""... never under this (a quiet machine's idle p99 is a few tenths of a ms) ..."""
LAG_MAX_MS = 10.0
"""... nor over this (20 idle probes on a very busy machine can catch one long stall)."""
WINDOWS_KEPT = 4096
"""Health windows kept for the per-level judgement (a worker's every 2 s: over 2 h for one worker)."""
DEFAULT_LAG_MS = 2.0
"""The lag threshold before a worker's idle measurement has arrived."""


SEND_SAMPLES = 8
"""Sends a level needs before its send shortfall is judged; the lag at each end of the window is the median
of this many sends there (a send held up alone does not move it)."""
DRAW_SDS = 3.0
"""A Poisson schedule's arrivals in a window are taken as its rate times the window plus this many standard
deviations (the count's square root): a low draw is not read as sends the client could not make."""


class LevelLoad(NamedTuple):
    """What a level asked of the client, to set what it did against (`Saturation.level_client`)."""

    users: float | None = None
    """A closed loop's users, whose in-flight mean is judged (None: not judged; failures held some back)."""
    send_shortfall: float | None = None
    """An uncapped open loop's `send_shortfall` (None: not judged)."""
    on_schedule: bool = False
    """An uncapped open loop: its load is its schedule's, so a late read cuts none of it."""


NOTHING_ASKED = LevelLoad()
"""No load to judge against: only the CPU and the loop lag are read."""


class HealthWindow(NamedTuple):
    """One worker's closed health window, placed in run time."""

    from_s: float
    to_s: float
    worker: int
    lag_ms: float
    cpu: float
    mean_lag_ms: float
    in_flight: float | None


class LevelClient(NamedTuple):
    """The client's health over one level's window, judged (`Saturation.level_client`)."""

    lag_ms: float
    """The timing bound: per worker the median of its health windows' lag p99 over the span, the worst
    worker's (how late a stamp could be for half the window or more)."""
    cpu: float
    """Likewise the CPU share (0..1 of a core)."""
    mean_lag_ms: float
    """Likewise the mean lag: the time an ended answer waited to be read (the load the server missed)."""
    cause: Cause | None
    """Why the client limits the load there (None: it does not)."""
    in_flight: float | None = None
    """Requests in flight over the span, all workers (each worker's median window; None: not measured)."""
    limited_by: tuple[ClientSign, ...] = ()
    """The signs that it limits the load (empty: it does not)."""


class Sustain:
    """One worker's saturated flag, from its disjoint health windows: a window is *over* when its lag p99
    exceeds the lag threshold or its CPU share exceeds the CPU threshold; the worker is saturated while its
    last ``windows`` (default 2) windows were all over, and clears at the first window that is not.

    So one noisy window (a neighbour's burst, the stall of N users starting at once) never flags; load the
    engine cannot keep up with does, one window later.
    """

    def __init__(self, lag_threshold_ms: float, cpu_threshold: float, windows: int = SUSTAIN_WINDOWS) -> None:
        self.lag_threshold_ms = lag_threshold_ms
        self.cpu_threshold = cpu_threshold
        self.windows = windows
        self.streak = 0
        """Consecutive over windows up to now."""
        self.last: tuple[float, float] = (0.0, 0.0)
        """The latest window's (lag p99 ms, CPU share)."""

    def update(self, lag_ms: float, cpu: float) -> bool:
        """Fold in one window's reading; return whether the worker is now flagged."""
        self.last = (lag_ms, cpu)
        over = lag_ms > self.lag_threshold_ms or cpu > self.cpu_threshold
        self.streak = self.streak + 1 if over else 0
        return self.saturated

    @property
    def saturated(self) -> bool:
        """The last ``windows`` windows were all over a threshold."""
        return self.streak >= self.windows


class Saturation:
    """Every worker's health readings over the run, whether the load generator is (or was) flagged, and the
    per-level judgement (`level_client`)."""

    def __init__(
        self,
        t0_ns: int,
        workers: int,
        lag_threshold_ms: float | None,
        cpu_threshold: float,
    ) -> None:
        """``lag_threshold_ms`` None: each worker's from its idle lag (`LAG_OVER_IDLE`)."""
        self.t0_ns = t0_ns
        self.workers = workers
        self.fixed_lag_ms = lag_threshold_ms
        self.cpu_threshold = cpu_threshold
        self.worker_health: list[tuple[float, float]] = [(0.0, 0.0)] * workers
        """Each worker's latest rolling (lag p99 ms, CPU share)."""
        self.worker_tasks = [0] * workers
        """Each worker's asyncio task count at its latest health window."""
        self.idle_lag_ms: list[float | None] = [None] * workers
        """Each worker's loop lag p99 with no load, measured at its start (None until it arrives)."""
        self.max_lag_ms = 0.0
        self.max_cpu = 0.0
        """Raw maxima of the rolling readings over the run (a momentary stall counts: for transparency)."""
        start = DEFAULT_LAG_MS if lag_threshold_ms is None else lag_threshold_ms
        self.sustain = [Sustain(start, cpu_threshold) for _ in range(workers)]
        self.windows: deque[HealthWindow] = deque(maxlen=WINDOWS_KEPT)
        """The latest health windows."""
        self.window_end_s: list[float | None] = [None] * workers
        """Each worker's latest window's end (the next one starts there)."""
        self.saturated_ever = False
        """Some worker was flagged (sustained, see `Sustain`) at some point of the run."""
        self.saturated_spans: list[list[float | None]] = []
        """When some worker was flagged: [from_s, to_s] of run time (to_s None while it lasts; at most
        `SATURATED_SPANS` kept, the latest). The condition began one health window before from_s."""

    @property
    def lag_threshold_ms(self) -> float:
        """The live flag's lag threshold: the fixed one, else the highest of the workers' own."""
        return max((s.lag_threshold_ms for s in self.sustain), default=DEFAULT_LAG_MS)

    def reading(self, worker: int, health: Health) -> None:
        """A worker's rolling reading (every batch)."""
        lag, cpu = health.loop_lag_p99_ms, health.cpu_share
        self.worker_health[worker] = (lag, cpu)
        self.max_lag_ms = max(self.max_lag_ms, lag)
        self.max_cpu = max(self.max_cpu, cpu)

    def window(self, worker: int, health: Health, t_ns: int) -> None:
        """A worker's closed health window (once every ``health_window_s``), reported at ``t_ns``."""
        if health.idle_lag_p99_ms is not None:
            self.idle_lag_ms[worker] = health.idle_lag_p99_ms
            if self.fixed_lag_ms is None:
                own = LAG_OVER_IDLE * health.idle_lag_p99_ms
                self.sustain[worker].lag_threshold_ms = min(LAG_MAX_MS, max(LAG_MIN_MS, own))
        was = self.saturated
        self.worker_tasks[worker] = health.tasks
        if self.sustain[worker].update(health.loop_lag_p99_ms, health.cpu_share):
            self.saturated_ever = True
        now = self.saturated
        t_s = round((t_ns - self.t0_ns) / 1e9, 3)
        start_s = self.window_end_s[worker] or 0.0  # the first one began at the worker's start
        self.window_end_s[worker] = t_s
        mean = health.loop_lag_mean_ms
        mean_ms = health.loop_lag_p99_ms if mean is None else mean  # an older session: the bound
        self.windows.append(
            HealthWindow(
                start_s, t_s, worker, health.loop_lag_p99_ms, health.cpu_share, mean_ms, health.in_flight_mean
            )
        )
        if now and not was:
            self.saturated_spans.append([t_s, None])
            del self.saturated_spans[:-SATURATED_SPANS]
        elif was and not now and self.saturated_spans:
            self.saturated_spans[-1][1] = t_s

    def level_client(
        self, span_s: tuple[float, float] | None, e2e_p50_ms: float, load: LevelLoad = NOTHING_ASKED
    ) -> LevelClient | None:
        """The client over ``span_s`` (run seconds): its timing bound, CPU share and whether it limits the
        load there (module docstring), from the health windows whose middle is inside the span (or, for a
        span shorter than a window, the ones that overlap it); None when no window covers it yet."""
        if span_s is None or span_s[1] <= span_s[0]:
            return None
        lo, hi = span_s
        inside = [w for w in self.windows if lo <= (w.from_s + w.to_s) / 2 <= hi]
        if not inside:  # a span shorter than a window
            inside = [w for w in self.windows if w.to_s > lo and w.from_s < hi]
        if not inside:
            return None
        lag = max(_medians((w.worker, w.lag_ms) for w in inside).values())
        cpu = max(_medians((w.worker, w.cpu) for w in inside).values())
        mean = max(_medians((w.worker, w.mean_lag_ms) for w in inside).values())
        # in flight only over windows wholly inside: one that began before the level held its pause or ramp
        whole = [w for w in inside if w.in_flight is not None and lo <= w.from_s and w.to_s <= hi]
        counts = _medians((w.worker, w.in_flight or 0.0) for w in whole)
        in_flight = sum(counts.values()) if len(counts) == len({w.worker for w in inside}) else None
        signs: list[ClientSign] = []
        if cpu > self.cpu_threshold:
            signs.append("cpu")
        e2e_known = math.isfinite(e2e_p50_ms) and e2e_p50_ms > 0
        if not load.on_schedule and e2e_known and mean >= MATERIAL_SHARE * e2e_p50_ms:
            signs.append("loop_lag")
        if load.users and in_flight is not None and in_flight < (1 - MATERIAL_SHARE) * load.users:
            signs.append("in_flight")
        if load.send_shortfall is not None and load.send_shortfall >= MATERIAL_SHARE:
            signs.append("send_lag")
        cause: Cause | None = None
        if signs:
            cause = cause_of(cpu, cpu_bound="cpu" in signs)
        return LevelClient(lag, cpu, mean, cause, in_flight, tuple(signs))

    @property
    def saturated(self) -> bool:
        """Some worker is flagged now."""
        return any(s.saturated for s in self.sustain)

    def health(self) -> ClientHealth:
        """Worst worker's rolling loop lag and CPU share; saturated when some worker's condition (lag p99
        over the lag threshold or CPU share over the CPU threshold) held in two consecutive health windows
        (`Sustain`), so one noisy moment never flags. The reason quotes the saturated workers' latest
        window and says which threshold it crossed."""
        raw_lag = lag = max((h[0] for h in self.worker_health), default=0.0)
        raw_cpu = cpu = max((h[1] for h in self.worker_health), default=0.0)
        flagged = [s for s in self.sustain if s.saturated]
        hot = [s.last for s in flagged]  # each one's latest window is over a threshold
        if hot:  # the figures in the message: the saturated workers' latest windows, not a rolling moment
            lag = max(h[0] for h in hot)
            cpu = max(h[1] for h in hot)
        reason = saturation_advice(
            workers=self.workers,
            cores=os.cpu_count() or 1,
            lag_p99_ms=lag,
            cpu_share=cpu,
            busy=bool(hot) and cpu > self.cpu_threshold,
            lagging=any(s.last[0] > s.lag_threshold_ms for s in flagged),
        )
        return ClientHealth(
            workers=self.workers,
            loop_lag_p99_ms=raw_lag,
            cpu_share=raw_cpu,
            saturated=bool(hot),
            reason=reason,
            worker_tasks=sum(self.worker_tasks),
        )


def _medians(pairs: Iterable[tuple[int, float]]) -> dict[int, float]:
    """Each worker's median reading."""
    by: dict[int, list[float]] = {}
    for worker, value in pairs:
        by.setdefault(worker, []).append(value)
    return {worker: statistics.median(v) for worker, v in by.items()}


def send_shortfall(
    sent_ns: npt.NDArray[np.int64],
    lag_ms: npt.NDArray[np.float64],
    window_ns: tuple[int, int],
    sends: int,
    rate: float | None,
    *,
    constant: bool = False,
    workers: int = 1,
) -> float | None:
    """How far an open loop's sends fell short of its schedule over a window: 1 - sent / scheduled, the
    ``sends`` made in the window (``sent_ns`` and ``lag_ms``, sent minus scheduled, are those or a uniform
    sample of them) against the arrivals due in it. A lag that stays put carries out of the window what it
    carried in and cuts no load; one that grows does, wherever in the window it grew (the lag's growth
    between the medians of the window's halves, read before, missed most of it when the client slowed late).

    A constant schedule's arrivals are ``rate`` times the window, give or take one per worker (so that many
    more sends are allowed). A Poisson one's count is uncertain by its square root, so its figure is the
    larger of two that do not read the draw as a shortfall: the count less `DRAW_SDS` of those, and the
    lag's growth from the window's first sends to its last per second between them (exact while they keep
    their order, low where sends overtake each other, as while many new connections open). A trace's
    (``rate`` None) is the latter. None below `SEND_SAMPLES` sends."""
    start, end = window_ns
    span_s = (end - start) / 1e9
    known = np.isfinite(lag_ms)
    sent, lag = sent_ns[known], lag_ms[known]
    if sends < SEND_SAMPLES or sent.size < SEND_SAMPLES or span_s <= 0:
        return None
    if constant and rate:
        return max(0.0, 1 - (sends + workers) / (rate * span_s))
    order = np.argsort(sent, kind="stable")
    ends = (order[:SEND_SAMPLES], order[-SEND_SAMPLES:])
    (t0, lag0), (t1, lag1) = ((np.median(sent[i]) / 1e6, np.median(lag[i])) for i in ends)
    by_lag = max(0.0, min(1.0, float(lag1 - lag0) / float(t1 - t0))) if t1 > t0 else 0.0
    if not rate:
        return by_lag
    due = rate * span_s
    return max(by_lag, 1 - (sends + DRAW_SDS * math.sqrt(due)) / due)


FIGURES_JUDGED = ("ttft", "tpot", "itl_chunk", "e2el")
"""The latency figures a timing bound is set against (every stamp of them may be up to the bound late)."""


def uncertain_figures(lag_ms: float, figures: dict[str, Stats]) -> tuple[str, ...]:
    """``name_pNN`` of each percentile (p50, p90, p95, p99) whose value the timing bound ``lag_ms`` is
    `MATERIAL_SHARE` or more of: the figures to flag beside (a 3 ms bound on a 5 ms ITL p99, not on a
    650 ms TTFT)."""
    out = []
    for name, stats in figures.items():
        for q in ("p50", "p90", "p95", "p99"):
            value = getattr(stats, q)
            if math.isfinite(value) and value > 0 and lag_ms >= MATERIAL_SHARE * value:
                out.append(f"{name}_{q}")
    return tuple(out)


def limit_notices(levels: Iterable[LevelView], workers: int) -> list[str]:
    """One line per level the client limited, from the levels' own flags (so the notices and the flags
    cannot disagree: both are this judgement of the latest views)."""
    return [
        client_limit(
            load_at(lv.mode, lv.value),
            workers,
            lv.client_limit_cause or "cpu",
            evidence_words(lv.client_evidence),
        )
        for lv in levels
        if lv.client_limited
    ]
