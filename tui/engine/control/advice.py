"""What to tell the user when the load generator cannot keep up: the words only (the numbers that decide it
are `tui.engine.control.saturation`'s)."""

from __future__ import annotations


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
        return (
            f"load generator delayed (event-loop lag p99 {lag_p99_ms:.1f} ms at {cpu_share:.0%} of a core): "
            "token timings may be late; the machine may be short of CPU (--workers helps only CPU-bound ones)"
        )
    return ""


def client_limit(at: str, workers: int) -> str:
    """The line for a level measured while the client was saturated (``at``: "8 users", "20 req/s"): its
    figures are the load generator's limit, so it cannot be the knee; the fix is more of it."""
    return (
        f"client is the limit at {at}: the load generator was saturated there, so its figures are the "
        f"client's, not the server's, and no knee is taken from it; try --workers {workers * 2} "
        "(on a machine with cores to spare)"
    )


def load_at(mode: str, value: float) -> str:
    """How a level's load is named in these lines: "8 users", "2.5 req/s" or "trace x2" (a replay's speed)."""
    if mode == "trace":
        return f"trace x{value:g}"
    return f"{value:g} users" if mode == "concurrency" else f"{value:g} req/s"
