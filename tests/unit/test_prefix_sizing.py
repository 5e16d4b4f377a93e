"""`size_prefix`: the shared prefix's word count found from what the server counts, without a server (the
engine test `tests/integration/test_exact_isl.py` does it against the simulator)."""

from __future__ import annotations

import pytest

from tui.engine.config import WorkloadConfig
from tui.engine.host.isl_probe import Count, size_prefix
from tui.engine.workload import RequestSpec
from tui.engine.workload.prefix import prefix_text
from tui.engine.workload.text import shared_prefix_text


def _counter(per_word: int, overhead: int, sent: list[str]) -> Count:
    """A server that counts ``per_word`` tokens a word and ``overhead`` for its template."""

    def count(n: int, spec: RequestSpec) -> int | str:
        assert spec.prompt is not None and spec.max_tokens == 1
        sent.append(spec.prompt)
        return overhead + per_word * len(spec.prompt.split())

    return count


@pytest.mark.parametrize(("per_word", "target"), [(1, 256), (2, 100), (3, 31)])
def test_the_prefix_is_sized_to_the_servers_count(per_word: int, target: int) -> None:
    sent: list[str] = []
    found = size_prefix(WorkloadConfig(shared_prefix=target), _counter(per_word, 7, sent), None)
    assert isinstance(found, tuple)
    words, tokens = found
    assert abs(tokens - target) < per_word and words == round(target / per_word)
    assert len(sent) <= 7  # the base, then a few candidates
    run_prefix = prefix_text(WorkloadConfig(shared_prefix=target, shared_prefix_sized=found))
    assert run_prefix == shared_prefix_text(0, words)
    # the probe prompts start with their own words, not the run's prefix: no cache block is warmed for it
    assert all(p.split()[:4] == sent[0].split()[:4] for p in sent)
    assert not any(p.startswith(run_prefix[:16]) for p in sent)


def test_a_failed_probe_request_is_its_notice() -> None:
    def count(n: int, spec: RequestSpec) -> int | str:
        return "ISL probe: HTTP 500 boom; prompts sized from answers only"

    assert size_prefix(WorkloadConfig(shared_prefix=64), count, 1.0) == (
        "ISL probe: HTTP 500 boom; prompts sized from answers only"
    )
