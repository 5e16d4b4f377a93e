"""What to tell the user when the load generator cannot keep up: the words only (the numbers that decide it
are `tui.engine.aggregate.saturation`'s)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from tui.engine.snapshot import ClientEvidence

Cause = Literal["cpu", "machine", "unclear"]
"""Why a worker could not keep up: its own CPU (``cpu``: more workers help), other processes' (``machine``: a
lagging loop in a worker using little CPU waits for a core, and more workers would wait too), or a lag at a
middling CPU share (``unclear``)."""

IDLE_CPU_SHARE = 0.1
"""Below this share of a core a lagging event loop is not the worker's load: spread over more workers, each
would lag the same (seen: lag p99 3.3 ms at 2 % of a core on a machine busy with other work)."""


MACHINE_FIX = "more workers will not help: free the machine or run tokentop on another one"
"""The advice when the machine is busy with other work (no ``--workers``: they would queue for the same
cores)."""


def cause_of(cpu_share: float, cpu_bound: bool) -> Cause:
    """The cause of a saturation from the saturated workers' CPU share (0..1 of a core) and whether it
    crossed the CPU threshold (``cpu_bound``); otherwise only the lag did."""
    if cpu_bound:
        return "cpu"
    return "machine" if cpu_share < IDLE_CPU_SHARE else "unclear"


def saturation_advice(
    *, workers: int, cores: int, lag_p99_ms: float, cpu_share: float, busy: bool, lagging: bool
) -> str:
    """One line for `ClientHealth.reason` ("" when all is well). The advice fits the cause: a worker using
    most of a core (``busy``) needs company (``--workers``); a lagging worker that uses little CPU is waiting
    for a core (the machine is busy) and more workers would not help. ``lag_p99_ms``/``cpu_share`` are the
    figures to quote (the saturated workers' latest health windows)."""
    if busy:
        advice = (
            f"try --workers {workers * 2}"
            if workers * 2 <= cores
            else f"this machine has {cores} cores for {workers} workers and the rest"
        )
        lag_note = f", event-loop lag p99 {lag_p99_ms:.1f} ms" if lagging else ""
        return (
            f"load generator saturated (a worker uses {cpu_share:.0%} of a core{lag_note}): "
            f"token timings may be late; {advice}"
        )
    if lagging:
        delayed = (
            f"load generator delayed (event-loop lag p99 {lag_p99_ms:.1f} ms at {cpu_share:.0%} of a core)"
        )
        if cause_of(cpu_share, cpu_bound=False) == "machine":
            busy_machine = "the machine is busy (other processes take the CPU)"
            return f"{delayed}: {busy_machine}; token timings may be late; {MACHINE_FIX}"
        return (
            f"{delayed}: token timings may be late; the machine may be short of CPU "
            "(--workers helps only CPU-bound ones)"
        )
    return ""


def client_limit(at: str, workers: int, cause: Cause = "cpu", seen: Sequence[str] = ()) -> str:
    """The line for a level measured while the client was the limit (``at``: "8 users", "20 req/s"): its
    figures are the load generator's limit, so it cannot be the knee; ``seen`` names the evidence
    (`evidence_words`); the fix fits the ``cause``: more workers when they were CPU-bound, a free machine
    when other processes held the CPU."""
    head = f"client is the limit at {at}: "
    what = f" ({', '.join(seen)})" if seen else ""
    tail = "so its figures are the client's, not the server's, and no knee is taken from it"
    if cause == "machine":
        return (
            f"{head}the load generator fell behind while its workers used little CPU{what}, the machine "
            f"busy with other work (other processes take the CPU), {tail}; {MACHINE_FIX}"
        )
    if cause == "unclear":
        return (
            f"{head}the load generator fell behind at a middling CPU share{what}, {tail}; "
            f"try --workers {workers * 2} if the machine has idle cores, else free it"
        )
    return (
        f"{head}the load generator was saturated there{what}, {tail}; try --workers {workers * 2} "
        "(on a machine with cores to spare)"
    )


def evidence_words(ev: ClientEvidence | None) -> list[str]:
    """What showed the client limiting a level, one phrase per sign (`ClientEvidence.limited_by`)."""
    if ev is None:
        return []
    words = {
        "cpu": f"a worker at {ev.cpu_share:.0%} of a core",
        "loop_lag": f"answers read {ev.mean_lag_ms:.1f} ms late on average, "
        f"{ev.mean_lag_ms / ev.e2e_p50_ms if ev.e2e_p50_ms > 0 else 0:.0%} of the median E2E",
        "in_flight": f"{ev.in_flight or 0:.1f} of {ev.users or 0:g} users in flight on average",
        "send_lag": f"sends {ev.send_shortfall or 0:.0%} behind their schedule",
    }
    return [words[sign] for sign in ev.limited_by]


def load_at(mode: str, value: float) -> str:
    """How a level's load is named in these lines: "8 users", "2.5 req/s" or "trace x2" (a replay's speed)."""
    if mode == "trace":
        return f"trace x{value:g}"
    return f"{value:g} users" if mode == "concurrency" else f"{value:g} req/s"
