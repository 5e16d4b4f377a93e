"""What the load keys mean, as pure functions of the current target (tested without a UI)."""

from __future__ import annotations

import math
from dataclasses import replace

from tui.engine.config import LoadTarget

MAX_CONCURRENCY = 4096
MIN_RATE_PER_S = 0.1
MAX_RATE_PER_S = 100_000.0
MIN_SPEED = 0.01
MAX_SPEED = 10_000.0


def speed_step(speed: float) -> float:
    """A trace's speed moves by 0.25 below x2, else as a rate does (x20 by 2, x50 by 5)."""
    return 0.25 if speed < 2 else rate_step(speed)


def rate_step(rate_per_s: float) -> float:
    """±0.5/s below 5/s, else the 1-2-5 value nearest below 10% (so 20/s moves by 2, 50/s by 5)."""
    if rate_per_s < 5:
        return 0.5
    tenth = rate_per_s * 0.1
    decade = 10 ** math.floor(math.log10(tenth))
    return float(max(m * decade for m in (1, 2, 5) if m * decade <= tenth))


def step(target: LoadTarget, direction: int) -> LoadTarget:
    """`+`/`-`: one user more/less, one rate step or one speed step; never below one user, 0.1/s or x0.01."""
    if target.mode == "concurrency":
        return replace(target, concurrency=_clamp_users(target.concurrency + direction))
    if target.mode == "trace":
        size = speed_step(target.speed if direction > 0 else max(MIN_SPEED, target.speed - 0.125))
        new = round((target.speed + direction * size) / size) * size
        return replace(target, speed=_clamp_speed(new), from_start=False)
    if direction > 0:
        size = rate_step(target.rate)
    else:
        # Step down by the step that applies just below the current rate, so 5 -> 4.5, not 5 -> 4.5 -> 4.
        size = rate_step(max(MIN_RATE_PER_S, target.rate - rate_step(target.rate) / 2))
    new = round((target.rate + direction * size) / size) * size
    return replace(target, rate=_clamp_rate(new))


def scale(target: LoadTarget, factor: float) -> LoadTarget:
    """`]`/`[`: double or halve the users, the rate or the trace's speed."""
    if target.mode == "trace":
        return replace(target, speed=_clamp_speed(target.speed * factor), from_start=False)
    if target.mode == "concurrency":
        users = target.concurrency * factor
        return replace(target, concurrency=_clamp_users(math.floor(users) if factor < 1 else round(users)))
    return replace(target, rate=_clamp_rate(target.rate * factor))


def toggle_mode(target: LoadTarget, measured_rate_per_s: float) -> LoadTarget:
    """`m`: concurrency <-> rate. Entering rate mode starts at the request rate measured now (rounded to a
    rate step), so the load does not jump; back in concurrency mode the last user count is kept. A trace
    replay keeps its mode (its times are the trace's)."""
    if target.mode == "trace":
        return target
    if target.mode == "rate":
        return replace(target, mode="concurrency")
    rate = target.rate
    if measured_rate_per_s > 0:
        size = rate_step(measured_rate_per_s)
        rate = max(size, round(measured_rate_per_s / size) * size)
    return replace(target, mode="rate", rate=_clamp_rate(rate))


def toggle_pause(target: LoadTarget) -> LoadTarget:
    return replace(target, paused=not target.paused)


def _clamp_users(users: int) -> int:
    return max(1, min(MAX_CONCURRENCY, int(users)))


def _clamp_rate(rate: float) -> float:
    return round(max(MIN_RATE_PER_S, min(MAX_RATE_PER_S, rate)), 3)


def _clamp_speed(speed: float) -> float:
    return round(max(MIN_SPEED, min(MAX_SPEED, speed)), 3)
