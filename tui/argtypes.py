"""Argument types for argparse shared by every parser (tokentop's and the simulator's own): one wording of
each bad-number error, which the parsers turn into their one-line usage error and exit status 2."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more: {text!r}")
    return value


def port_number(text: str) -> int:
    """A TCP port, 1..65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port in 1..65535: {text!r}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def non_negative_float(text: str) -> float:
    """A finite number of at least 0."""
    value = _number(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be zero or more: {text!r}")
    return value


def share(text: str) -> float:
    """A share strictly between 0 and 1 (0.95 for 95 %)."""
    value = _number(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (0.95 for 95 %): {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0 (NaN refused)."""
    value = _number(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def level_list(kind: type[int] | type[float]) -> Callable[[str], list[float]]:
    """A comma-separated list of positive numbers (``1,2,4``): load levels, trace speeds."""

    def parse(text: str) -> list[float]:
        try:
            values = [kind(part) for part in text.split(",") if part.strip()]
        except ValueError:
            message = f"expected a comma-separated list of numbers: {text!r}"
            raise argparse.ArgumentTypeError(message) from None
        if not values or any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"levels must be positive: {text!r}")
        return values

    return parse
