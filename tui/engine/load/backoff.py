"""How long a closed-loop user waits after a failed request: no hot loop on any error class.

A closed-loop user sends its next request as soon as the last ends; against a server that refuses, rate
limits or fails fast, that is hundreds of requests per second from a handful of users (a server answering
every request 429 with ``Retry-After: 2`` got 500-800 requests/s). So, per user:

- a ``Retry-After`` (429, 503) is honoured: the user waits at least that long (capped), plus up to 10% so
  the users do not all come back in the same instant;
- a failure to connect backs off from the first one (nobody is there to measure);
- any other failure backs off from the second in a row: exponential from ``FIRST_S``, capped at ``CAP_S``,
  with "equal jitter" (half fixed, half random), so one stray error among successes costs nothing;
- a success (or a cancel) resets it: load against a healthy server is never held back.
"""

from __future__ import annotations

import random
from typing import NamedTuple

FIRST_S = 0.05
"""The first back-off step, in seconds; it doubles with each further failure in a row."""
CAP_S = 5.0
"""The longest back-off without a ``Retry-After``."""
RETRY_AFTER_CAP_S = 60.0
"""The longest ``Retry-After`` obeyed (a server asking for an hour would stall the run)."""


class Outcome(NamedTuple):
    """What a finished request tells the user that sent it."""

    error_class: str | None
    """None when it succeeded."""
    retry_after_s: float | None = None
    """The server's ``Retry-After``, in seconds, if it sent one."""


class Backoff:
    """One user's back-off state."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.failures = 0
        """Failures in a row."""
        self._rng = rng or random.Random()

    def delay_s(self, outcome: Outcome) -> float:
        """Seconds to wait before this user's next request, after ``outcome``."""
        error = outcome.error_class
        if error is None or error == "cancelled":
            self.failures = 0
            return 0.0
        self.failures += 1
        if outcome.retry_after_s is not None:
            wait_s = min(outcome.retry_after_s, RETRY_AFTER_CAP_S)
            return wait_s * (1.0 + 0.1 * self._rng.random())
        steps = self.failures if error == "connect" else self.failures - 1
        if steps <= 0:
            return 0.0
        step_s = min(CAP_S, FIRST_S * 2.0 ** min(steps - 1, 30))
        return step_s / 2 + self._rng.uniform(0.0, step_s / 2)
