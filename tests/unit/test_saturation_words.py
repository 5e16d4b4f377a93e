"""How the client-limit line names a level's load: a trace replay's level is its speed, not a request rate."""

from __future__ import annotations

from tui.engine.control.advice import client_limit, load_at


def test_a_levels_load_is_named_by_its_mode() -> None:
    assert load_at("concurrency", 8) == "8 users"
    assert load_at("rate", 2.5) == "2.5 req/s"
    assert load_at("trace", 2) == "trace x2"
    assert client_limit(load_at("trace", 1), 1).startswith("client is the limit at trace x1:")
