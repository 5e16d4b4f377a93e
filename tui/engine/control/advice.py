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
