"""The real servers the `real` suite runs against (`tests/real/conftest.py`): found up, or skipped."""

from __future__ import annotations

from typing import NamedTuple

import httpx
import pytest


class Server(NamedTuple):
    """A real server that answered: its root URL (no ``/v1``), its model, its ``/metrics`` text."""

    url: str
    model: str
    metrics: str


def up(url: str, prefix: str, how: str) -> Server:
    """The server at ``url`` if it answers ``/v1/models`` and its ``/metrics`` has ``prefix`` names; else
    the test is skipped, saying how to start one."""
    root = url.rstrip("/").removesuffix("/v1")
    try:
        with httpx.Client(timeout=3.0) as client:
            models = client.get(root + "/v1/models").json()["data"]
            metrics = client.get(root + "/metrics").text
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        pytest.skip(f"no server at {root} ({type(exc).__name__}): {how}")
    if prefix not in metrics:
        pytest.skip(f"{root} is up but its /metrics has no {prefix} names: {how}")
    return Server(root, str(models[0]["id"]), metrics)
