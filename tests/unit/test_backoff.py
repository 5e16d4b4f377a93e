"""Back-off per user and Retry-After parsing: pure functions, table tests."""

from __future__ import annotations

import email.utils
import random

import pytest

from tui.engine.load.backoff import (
    CAP_S,
    CONNECT_CAP_S,
    FIRST_S,
    RETRY_AFTER_CAP_S,
    ArrivalGate,
    Backoff,
    Outcome,
)
from tui.engine.stream.retry_after import parse_retry_after


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1", 1.0), (" 2.5 ", 2.5), ("0", 0.0), ("-1", None), ("soon", None), ("", None), (None, None),
     ("nan", None), ("inf", None)],
)  # fmt: skip
def test_retry_after_in_seconds(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value) == seconds


def test_retry_after_as_an_http_date() -> None:
    now_s = 1_800_000_000.0
    later = email.utils.formatdate(now_s + 30, usegmt=True)
    assert parse_retry_after(later, now_s=now_s) == pytest.approx(30.0)
    earlier = email.utils.formatdate(now_s - 30, usegmt=True)
    assert parse_retry_after(earlier, now_s=now_s) == 0.0


def test_retry_after_is_honoured_with_a_little_jitter_and_capped() -> None:
    b = Backoff(random.Random(1))
    for _ in range(20):
        assert 1.0 <= b.delay_s(Outcome("http_429", 1.0)) <= 1.1
    assert b.delay_s(Outcome("http_429", 3600.0)) <= RETRY_AFTER_CAP_S * 1.1


def test_repeated_failures_back_off_exponentially_capped_and_a_success_resets() -> None:
    b = Backoff(random.Random(2))
    assert b.delay_s(Outcome("http_5xx")) == 0.0  # one stray failure costs nothing
    delays = [b.delay_s(Outcome("http_5xx")) for _ in range(12)]
    for k, d in enumerate(delays):
        step = min(CAP_S, FIRST_S * 2**k)
        assert step / 2 <= d <= step
    assert max(delays) <= CAP_S
    assert b.delay_s(Outcome(None)) == 0.0 and b.failures == 0
    assert b.delay_s(Outcome("http_5xx")) == 0.0


def test_connect_failures_back_off_from_the_first() -> None:
    b = Backoff(random.Random(3))
    assert FIRST_S / 2 <= b.delay_s(Outcome("connect")) <= FIRST_S


def test_cancel_is_not_a_failure() -> None:
    b = Backoff(random.Random(4))
    b.delay_s(Outcome("http_5xx"))
    assert b.delay_s(Outcome("cancelled")) == 0.0 and b.failures == 0


def test_refused_connections_back_off_to_a_short_cap_so_a_restarted_server_is_found_soon() -> None:
    b = Backoff(random.Random(5))
    delays = [b.delay_s(Outcome("connect")) for _ in range(20)]
    assert max(delays) <= CONNECT_CAP_S < CAP_S
    assert min(delays[8:]) >= CONNECT_CAP_S / 2  # capped, still a back-off: at most 2 attempts a second


def test_a_tls_failure_backs_off_from_the_first_to_the_long_cap() -> None:
    b = Backoff(random.Random(6))
    assert FIRST_S / 2 <= b.delay_s(Outcome("tls")) <= FIRST_S
    assert max(b.delay_s(Outcome("tls")) for _ in range(12)) > CONNECT_CAP_S


MS = 1_000_000


def test_the_gate_holds_arrivals_for_a_retry_after_and_counts_those_dropped() -> None:
    gate = ArrivalGate(random.Random(7))
    gate.see(Outcome("http_429", 2.0), sent_ns=0, now_ns=100 * MS)
    assert not gate.admit(100 * MS) and not gate.admit(2_000 * MS)
    assert gate.admit(2_400 * MS)  # 2 s plus at most 10% jitter, from when the 429 came back
    assert gate.dropped == 2


def test_the_gate_learns_once_from_a_burst_of_failures_sent_before_its_hold() -> None:
    """A server that goes away fails every request in flight at once: one escalation, not one per request."""
    gate = ArrivalGate(random.Random(8))
    for k in range(50):  # 50 requests sent at 0..49 ms, all refused at 100 ms
        gate.see(Outcome("connect"), sent_ns=k * MS, now_ns=100 * MS)
    first_hold_ns = gate.hold_until_ns - 100 * MS
    assert FIRST_S / 2 * 1e9 <= first_hold_ns <= FIRST_S * 1e9
    gate.see(Outcome("connect"), sent_ns=200 * MS, now_ns=201 * MS)  # the next probe, after the hold
    assert gate.hold_until_ns - 201 * MS > first_hold_ns * 0.99  # the second step, about twice the first


def test_the_gate_lets_a_stray_5xx_pass_and_a_success_resets_it() -> None:
    gate = ArrivalGate(random.Random(9))
    gate.see(Outcome("http_5xx"), sent_ns=0, now_ns=MS)
    assert gate.admit(MS)  # one failure among successes costs nothing
    gate.see(Outcome(None), sent_ns=MS, now_ns=2 * MS)
    gate.see(Outcome("http_5xx"), sent_ns=3 * MS, now_ns=4 * MS)
    assert gate.admit(4 * MS) and gate.dropped == 0
    gate.see(Outcome("http_5xx"), sent_ns=5 * MS, now_ns=6 * MS)  # two in a row: a hold
    assert not gate.admit(7 * MS) and gate.dropped == 1


def test_after_a_hold_one_probe_at_a_time_until_a_success() -> None:
    """At a high rate, arrivals sent while the first request after a hold is out would multiply the
    attempts by rate x latency: they are dropped until it is back, and all pass again after a success."""
    gate = ArrivalGate(random.Random(10))
    gate.see(Outcome("connect"), sent_ns=0, now_ns=MS)
    after_ns = gate.hold_until_ns
    assert gate.admit(after_ns)  # the probe
    assert not gate.admit(after_ns + MS) and not gate.admit(after_ns + 2 * MS)  # it is still out
    gate.see(Outcome(None), sent_ns=after_ns, now_ns=after_ns + 3 * MS)  # the server is back
    assert all(gate.admit(after_ns + k * MS) for k in range(4, 10))
    assert gate.dropped == 2
