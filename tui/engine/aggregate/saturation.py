"""Is the load generator keeping up? The face's judgement of the health readings its workers send.

Each worker measures itself (`tui.engine.load.health`: event-loop lag, CPU share) and sends two kinds of
reading: rolling ones in every batch (for display and the run's maxima) and one per disjoint health window,
which `Sustain` turns into the saturated flag. This module keeps those per worker, the run's maxima and the
spans of run time when some worker was saturated, and turns them into `ClientHealth` (the advice wording is
`tui.engine.aggregate.advice`'s).
"""

from __future__ import annotations

import os

from tui.engine.aggregate.advice import Cause, cause_of, saturation_advice
from tui.engine.snapshot import ClientHealth
from tui.engine.wire import Health

SUSTAIN_WINDOWS = 2
"""Consecutive over-threshold health windows that make a worker saturated."""
LIMITED_SHARE = 0.5
"""A level is the client's (`Saturation.during`) when the client was flagged for this share of its window."""
SATURATED_SPANS = 100
"""Saturated spans kept (the latest)."""


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
        """Fold in one window's reading; return whether the worker is now saturated."""
        self.last = (lag_ms, cpu)
        over = lag_ms > self.lag_threshold_ms or cpu > self.cpu_threshold
        self.streak = self.streak + 1 if over else 0
        return self.saturated

    @property
    def saturated(self) -> bool:
        """The last ``windows`` windows were all over a threshold."""
        return self.streak >= self.windows


class Saturation:
    """Every worker's health readings over the run, and whether the load generator is (or was) saturated."""

    def __init__(self, t0_ns: int, workers: int, lag_threshold_ms: float, cpu_threshold: float) -> None:
        self.t0_ns = t0_ns
        self.workers = workers
        self.lag_threshold_ms = lag_threshold_ms
        self.cpu_threshold = cpu_threshold
        self.worker_health: list[tuple[float, float]] = [(0.0, 0.0)] * workers
        """Each worker's latest rolling (lag p99 ms, CPU share)."""
        self.worker_tasks = [0] * workers
        """Each worker's asyncio task count at its latest health window."""
        self.max_lag_ms = 0.0
        self.max_cpu = 0.0
        """Raw maxima of the rolling readings over the run (a momentary stall counts: for transparency)."""
        self.sustain = [Sustain(lag_threshold_ms, cpu_threshold) for _ in range(workers)]
        self.saturated_ever = False
        """Some worker was saturated (sustained, see `Sustain`) at some point of the run."""
        self.saturated_spans: list[list[float | None]] = []
        """When some worker was flagged saturated: [from_s, to_s] of run time (to_s None while it lasts; at
        most `SATURATED_SPANS` kept, the latest). The condition began one health window before from_s."""
        self.span_cpu: list[float] = []
        """Beside each saturated span: the highest CPU share of a saturated worker's window in it, which says
        whether the worker's own CPU or a busy machine was the cause (`advice.cause_of`)."""

    def reading(self, worker: int, health: Health) -> None:
        """A worker's rolling reading (every batch)."""
        lag, cpu = health.loop_lag_p99_ms, health.cpu_share
        self.worker_health[worker] = (lag, cpu)
        self.max_lag_ms = max(self.max_lag_ms, lag)
        self.max_cpu = max(self.max_cpu, cpu)

    def window(self, worker: int, health: Health, t_ns: int) -> None:
        """A worker's closed health window (once every ``health_window_s``), reported at ``t_ns``."""
        was = self.saturated
        self.worker_tasks[worker] = health.tasks
        if self.sustain[worker].update(health.loop_lag_p99_ms, health.cpu_share):
            self.saturated_ever = True
        now = self.saturated
        t_s = round((t_ns - self.t0_ns) / 1e9, 3)
        if now and not was:
            self.saturated_spans.append([t_s, None])
            self.span_cpu.append(0.0)
            del self.saturated_spans[:-SATURATED_SPANS]
            del self.span_cpu[:-SATURATED_SPANS]
        elif was and not now and self.saturated_spans:
            self.saturated_spans[-1][1] = t_s
        if now:
            hot = max(s.last[1] for s in self.sustain if s.saturated)
            self.span_cpu[-1] = max(self.span_cpu[-1], hot)

    def during(self, span_s: tuple[float, float] | None) -> bool:
        """Whether some worker was flagged saturated for at least `LIMITED_SHARE` of ``span_s`` (run
        seconds): a level measured then shows the client's limit. A moment of it (a neighbour's burst on a
        shared machine) late timings may show, but not the level's throughput."""
        return self.limit_during(span_s) is not None

    def limit_during(self, span_s: tuple[float, float] | None) -> Cause | None:
        """Why the client was the limit over ``span_s`` (see `during`), or None when it was not: ``cpu``
        when a saturated worker's window in it crossed the CPU threshold, else the lag alone tripped and
        the saturated workers' CPU share says whether the machine was busy with other work."""
        if span_s is None or span_s[1] <= span_s[0]:
            return None
        lo, hi = span_s
        covered, cpu = 0.0, 0.0
        for (a, b), span_cpu in zip(self.saturated_spans, self.span_cpu, strict=True):
            overlap = 0.0 if a is None else min(hi, hi if b is None else b) - max(lo, a)
            if overlap > 0:
                covered += overlap
                cpu = max(cpu, span_cpu)
        if covered < LIMITED_SHARE * (hi - lo):
            return None
        return cause_of(cpu, cpu_bound=cpu > self.cpu_threshold)

    @property
    def saturated(self) -> bool:
        """Some worker is saturated now."""
        return any(s.saturated for s in self.sustain)

    def health(self) -> ClientHealth:
        """Worst worker's rolling loop lag and CPU share; saturated when some worker's condition (lag p99
        over the lag threshold or CPU share over the CPU threshold) held in two consecutive health windows
        (`Sustain`), so one noisy moment never flags. The reason quotes the saturated workers' latest
        window and says which threshold it crossed."""
        raw_lag = lag = max((h[0] for h in self.worker_health), default=0.0)
        raw_cpu = cpu = max((h[1] for h in self.worker_health), default=0.0)
        hot = [s.last for s in self.sustain if s.saturated]  # each one's latest window is over a threshold
        if hot:  # the figures in the message: the saturated workers' latest windows, not a rolling moment
            lag = max(h[0] for h in hot)
            cpu = max(h[1] for h in hot)
        reason = saturation_advice(
            workers=self.workers,
            cores=os.cpu_count() or 1,
            lag_p99_ms=lag,
            cpu_share=cpu,
            busy=bool(hot) and cpu > self.cpu_threshold,
            lagging=bool(hot) and lag > self.lag_threshold_ms,
        )
        return ClientHealth(
            workers=self.workers,
            loop_lag_p99_ms=raw_lag,
            cpu_share=raw_cpu,
            saturated=bool(hot),
            reason=reason,
            worker_tasks=sum(self.worker_tasks),
        )
