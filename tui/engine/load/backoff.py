"""How long a closed-loop user waits after a failed request: no hot loop on any error class.

A closed-loop user sends its next request as soon as the last ends; against a server that refuses, rate
limits or fails fast, that is hundreds of requests per second from a handful of users (a server answering
every request 429 with ``Retry-After: 2`` got 500-800 requests/s). So, per user:

- a ``Retry-After`` (429, 503) is honoured: the user waits at least that long (capped), plus up to 10% so
  the users do not all come back in the same instant;
- a failure to connect, or a TLS handshake that failed, backs off from the first one (nobody is there to
  measure); a refused connection costs the server nothing (the kernel answers it), so its back-off is
  capped at ``CONNECT_CAP_S``: a server that restarts gets its full load back within about a second;
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
CONNECT_CAP_S = 1.0
"""The longest back-off after failures to connect: the next attempt finds a restarted server that soon."""
FROM_FIRST = frozenset({"connect", "tls"})
"""Failure classes that back off from the first one: no server answered, so no request was measured."""
SERVER_GONE = frozenset({"connect", "disconnect"})
"""Failure classes that say the server went away: a success elsewhere means it is back
(`tui.engine.load.runner` then wakes the users waiting out such a back-off)."""
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
        steps = self.failures if error in FROM_FIRST else self.failures - 1
        if steps <= 0:
            return 0.0
        cap_s = CONNECT_CAP_S if error == "connect" else CAP_S
        step_s = min(cap_s, FIRST_S * 2.0 ** min(steps - 1, 30))
        return step_s / 2 + self._rng.uniform(0.0, step_s / 2)


class ArrivalGate:
    """An open loop's back-off: while the server fails, arrivals are held, and those due meanwhile dropped.

    Open-loop arrivals do not wait for each other, so a failing server gets no more than the scheduled rate,
    except when late arrivals (queued behind a ``max_concurrency`` cap, or after a stall) meet fast failures:
    each failure frees a slot for the next late one at once, a hot loop of failures. So the same `Backoff`
    rules hold the whole stream: an arrival due inside a hold is *dropped* (counted, never sent: sending the
    held ones at its end would be a burst above the rate); the schedule runs on, so the offered rate is the
    scheduled one again the moment the hold ends. A ``Retry-After`` always sets a hold that long. Otherwise a
    failure of a request sent before the current hold began does not lengthen it: when a server goes away all
    requests in flight fail together, and that is one failure to learn from, not one per request. After a
    hold, until a request succeeds, one request at a time probes the server (a circuit breaker's half-open
    state) and the arrivals due while it is out are dropped too: at a high rate those would otherwise
    multiply the attempts by the rate times the probe's latency."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._backoff = Backoff(rng)
        self.hold_until_ns = 0
        """No arrival is sent before this (``perf_counter_ns``)."""
        self._hold_from_ns = 0
        self._failing = False
        """A hold was set and no request has succeeded since: only probes are sent."""
        self._probe_from_ns: int | None = None
        """When the probe now out was admitted; None: none is out."""
        self.dropped = 0
        """Arrivals dropped (in a hold, or while a probe was out) since the owner last took them."""

    def see(self, outcome: Outcome, sent_ns: int, now_ns: int) -> None:
        """Learn from one finished open-loop request sent at ``sent_ns``."""
        error = outcome.error_class
        if self._probe_from_ns is not None and sent_ns >= self._probe_from_ns:
            self._probe_from_ns = None  # the probe is back (a later request can only be the probe)
        if error == "cancelled":
            return
        if error is None:
            self._failing = False
        elif outcome.retry_after_s is None and sent_ns < self._hold_from_ns:
            return
        delay_s = self._backoff.delay_s(outcome)
        if delay_s > 0:
            self.hold_until_ns = max(self.hold_until_ns, now_ns + int(delay_s * 1e9))
            self._hold_from_ns = now_ns
            self._failing = True

    def admit(self, now_ns: int) -> bool:
        """Whether an arrival due now may be sent (then call `see` with its outcome); False counts it as
        dropped."""
        if now_ns < self.hold_until_ns or (self._failing and self._probe_from_ns is not None):
            self.dropped += 1
            return False
        if self._failing:
            self._probe_from_ns = now_ns
        return True
