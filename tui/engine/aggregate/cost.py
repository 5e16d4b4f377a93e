"""What a level's tokens cost: dollars per million tokens at the server's hourly price, and joules per
output token from the GPU's energy counter. Pure arithmetic, spelled once for the tables and the results.

A figure is None where it cannot be had: no price, no energy reading, or a rate that is not a positive
number (a level too short to measure). Each divides in the order its docstring states, so a saved level's
figure is exactly that expression of its saved inputs.
"""

from __future__ import annotations

import math


def _rate(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) and x > 0 else None


def usd_per_mtok(usd_per_hour: float | None, tokens_per_s: float | None) -> float | None:
    """``usd_per_hour / 3600 / tokens_per_s * 1e6``: the price of a million tokens at this rate."""
    rate = _rate(tokens_per_s)
    if usd_per_hour is None or rate is None:
        return None
    return usd_per_hour / 3600 / rate * 1e6


def input_tokens_per_s(total_input_tokens: int, duration_s: float | None) -> float | None:
    """The input tokens of a level's requests over its window (`total_input_tokens / duration`)."""
    if duration_s is None or not math.isfinite(duration_s) or duration_s <= 0:
        return None
    return total_input_tokens / duration_s


def mean_power_w(energy_j: float | None, energy_s: float | None) -> float | None:
    """``energy_j / energy_s``: the GPUs' mean power between two readings of their energy counter."""
    span = _rate(energy_s)
    if energy_j is None or span is None or not math.isfinite(energy_j) or energy_j < 0:
        return None
    return energy_j / span


def joules_per_token(
    energy_j: float | None, energy_s: float | None, tokens_per_s: float | None
) -> float | None:
    """``energy_j / energy_s / tokens_per_s``: the mean power over the level's output tokens per second."""
    power, rate = mean_power_w(energy_j, energy_s), _rate(tokens_per_s)
    if power is None or rate is None:
        return None
    return power / rate


def tokens_per_joule(
    energy_j: float | None, energy_s: float | None, tokens_per_s: float | None
) -> float | None:
    """``tokens_per_s / (energy_j / energy_s)``: output tokens per joule; None at zero power."""
    power, rate = mean_power_w(energy_j, energy_s), _rate(tokens_per_s)
    if power is None or rate is None or power <= 0:
        return None
    return rate / power
