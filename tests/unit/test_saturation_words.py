"""What the client-limit and saturation lines say: a level's load by its mode, and the fix by the cause (more
workers for CPU-bound ones; a free machine when the loop lags at a low CPU share)."""

from __future__ import annotations

from tui.engine.aggregate.advice import client_limit, load_at
from tui.engine.aggregate.saturation import Saturation
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
    assert sat.limit_during((3.0, 7.0)) == "machine"  # the level is the client's all the same
    line = client_limit("8 users", 1, "machine")
    assert line.startswith("client is the limit at 8 users: ") and "no knee is taken from it" in line
    assert "free the machine" in line and "--workers" not in line


def test_a_cpu_bound_worker_keeps_the_workers_advice() -> None:
    sat = _flagged(Health(3.3, 0.9), Health(0.5, 0.9), Health(0.5, 0.9))
    assert "try --workers 2" in sat.health().reason or "cores for 1 workers" in sat.health().reason
    assert sat.limit_during((3.0, 7.0)) == "cpu"
    assert "try --workers 2" in client_limit("8 users", 1, "cpu")


def test_a_lag_at_a_middling_cpu_share_says_more_workers_help_only_with_idle_cores() -> None:
    sat = _flagged(Health(5.0, 0.3), Health(5.0, 0.3), Health(5.0, 0.3))
    assert "short of CPU" in sat.health().reason
    assert sat.limit_during((3.0, 7.0)) == "unclear"
    assert "--workers 2 if the machine has idle cores" in client_limit("8 users", 1, "unclear")


def test_a_span_that_was_cpu_bound_for_a_while_is_cpu_bound() -> None:
    """Lag first (a busy machine), then the worker's own CPU over the threshold, in one saturated span: the
    level's cause is the CPU (more workers help), whatever came first."""
    sat = _flagged(Health(3.0, 0.02), Health(3.0, 0.02), Health(3.0, 0.9), Health(3.0, 0.02))
    assert len(sat.saturated_spans) == 1
    assert sat.limit_during((3.0, 9.0)) == "cpu"
    assert sat.limit_during((0.0, 3.0)) is None  # not flagged for half of it
