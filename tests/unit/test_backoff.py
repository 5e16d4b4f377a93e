"""Back-off per user and Retry-After parsing: pure functions, table tests."""

from __future__ import annotations

import email.utils
import random

import pytest

from tui.engine.load.backoff import CAP_S, FIRST_S, RETRY_AFTER_CAP_S, Backoff, Outcome
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
