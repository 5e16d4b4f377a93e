"""What the client-limit and saturation lines say: a level's load by its mode, and the fix by the cause (more
workers for CPU-bound ones; a free machine when the loop lags at a low CPU share). And the rule apart from
the words: the client limits a level only when CPU-bound or lagging by a material share of its E2E; a lag
otherwise is a timing bound on the figures (`uncertain_figures`), and the lag threshold is the machine's."""

from __future__ import annotations

from tui.engine.aggregate.advice import client_limit, load_at
from tui.engine.aggregate.saturation import Saturation, uncertain_figures
from tui.engine.snapshot import Stats
from tui.engine.wire import Health

S = 1_000_000_000


def test_a_levels_load_is_named_by_its_mode() -> None:
    assert load_at("concurrency", 8) == "8 users"
    assert load_at("rate", 2.5) == "2.5 req/s"
    assert load_at("trace", 2) == "trace x2"
    assert client_limit(load_at("trace", 1), 1).startswith("client is the limit at trace x1:")


def _flagged(*readings: Health) -> Saturation:
    """One worker's health windows, 2 s apart from t = 2 s, with the default thresholds."""
    sat = Saturation(0, workers=1, lag_threshold_ms=2.0, cpu_threshold=0.6)
    for i, health in enumerate(readings, start=1):
        sat.reading(0, health)
        sat.window(0, health, 2 * i * S)
    return sat


def test_a_lag_at_a_low_cpu_share_is_a_busy_machine_and_more_workers_would_not_help() -> None:
    """The reading seen on a machine busy with other work: lag p99 3.3 ms at 2 % of a core."""
    sat = _flagged(Health(3.3, 0.02), Health(3.3, 0.02), Health(3.3, 0.02))
    health = sat.health()
    assert health.saturated
    assert "lag p99 3.3 ms at 2% of a core" in health.reason
    assert "the machine is busy (other processes take the CPU)" in health.reason
    assert "more workers will not help" in health.reason and "--workers" not in health.reason
    # a timing bound, not a verdict: 3.3 ms on a 650 ms median E2E is not the client's limit ...
    judged = sat.level_client((3.0, 7.0), 650.0)
    assert judged is not None and judged.cause is None and judged.lag_ms == 3.3 and judged.cpu == 0.02
    # ... on 40 ms answers, read 3.3 ms late on average (8 % of each), it is: the server held less load
    assert (judged := sat.level_client((3.0, 7.0), 40.0)) is not None and judged.cause == "machine"
    # the verdict takes the mean lag (the slot's idle time), the bound the p99: late 0.4 ms on average is not
    rare = _flagged(*[Health(3.3, 0.02, 0, None, 0.4)] * 3)
    assert (judged := rare.level_client((3.0, 7.0), 40.0)) is not None and judged.cause is None
    line = client_limit("8 users", 1, "machine")
    assert line.startswith("client is the limit at 8 users: ") and "no knee is taken from it" in line
    assert "free the machine" in line and "--workers" not in line


def test_a_cpu_bound_worker_keeps_the_workers_advice() -> None:
    sat = _flagged(Health(3.3, 0.9), Health(0.5, 0.9), Health(0.5, 0.9))
    assert "try --workers 2" in sat.health().reason or "cores for 1 workers" in sat.health().reason
    judged = sat.level_client((3.0, 7.0), 10_000.0)
    assert judged is not None and judged.cause == "cpu"  # however long the answers
    assert "try --workers 2" in client_limit("8 users", 1, "cpu")


def test_a_lag_at_a_middling_cpu_share_says_more_workers_help_only_with_idle_cores() -> None:
    sat = _flagged(Health(5.0, 0.3), Health(5.0, 0.3), Health(5.0, 0.3))
    assert "short of CPU" in sat.health().reason
    assert (judged := sat.level_client((3.0, 7.0), 50.0)) is not None and judged.cause == "unclear"
    assert "--workers 2 if the machine has idle cores" in client_limit("8 users", 1, "unclear")


def test_a_level_is_cpu_bound_when_its_worker_was_for_half_its_window() -> None:
    """Per worker the median of its windows over the level: one CPU-bound window of three (a burst) is not the
    client's limit; two of three are."""
    burst = _flagged(Health(3.0, 0.02), Health(3.0, 0.9), Health(3.0, 0.02), Health(0.5, 0.02))
    assert (judged := burst.level_client((2.0, 8.0), 650.0)) is not None and judged.cause is None
    held = _flagged(Health(3.0, 0.02), Health(3.0, 0.9), Health(3.0, 0.9), Health(0.5, 0.02))
    assert (judged := held.level_client((2.0, 8.0), 650.0)) is not None and judged.cause == "cpu"
    assert held.level_client((20.0, 30.0), 650.0) is None  # no window there


def test_the_lag_threshold_is_the_machines_own() -> None:
    """No fixed threshold: each worker's is `LAG_OVER_IDLE` (4) times the lag it measured idle, at least
    1 ms. A worker idle at 1.5 ms (a busy machine) is not flagged at 3.3 ms; one idle at 0.3 ms is."""
    for idle, flagged in ((1.5, False), (0.3, True)):
        sat = Saturation(0, workers=1, lag_threshold_ms=None, cpu_threshold=0.6)
        for i in range(1, 4):
            sat.window(0, Health(3.3, 0.02, 0, idle if i == 1 else None), 2 * i * S)
        assert sat.lag_threshold_ms == max(1.0, 4 * idle)
        assert sat.health().saturated is flagged


def _stats(p50: float, p99: float) -> Stats:
    return Stats(n=100, mean=p50, std=0.0, p50=p50, p90=p99, p95=p99, p99=p99, min=p50, max=p99)


def test_a_timing_bound_flags_only_the_figures_it_is_a_material_share_of() -> None:
    """5 % of the figure: a 3 ms bound on a 650 ms TTFT says nothing, on a 5 ms ITL p99 it does."""
    table = [  # (bound ms, p50, p99, flagged)
        (3.0, 650.0, 900.0, ()),
        (3.0, 20.0, 61.0, ("x_p50",)),
        (3.0, 2.0, 5.0, ("x_p50", "x_p90", "x_p95", "x_p99")),
        (0.0, 2.0, 5.0, ()),
        (1.0, float("nan"), float("nan"), ()),
    ]
    for bound, p50, p99, flagged in table:
        assert uncertain_figures(bound, {"x": _stats(p50, p99)}) == flagged, (bound, p50, p99)
