"""Synthetic prompts whose lengths vary per request: ISL and OSL each fixed, normal or uniform, or a
weighted list of (ISL, OSL) scenarios (`--isl-dist`, `--osl-dist`, `--scenarios`).

Deterministic in (seed, worker, seq): the same seed asks for the same lengths and the same text, request by
request. The text follows the synthetic rule (about one token per word); exact lengths by the server's own
count are the calibration's business (issue 10 §1), not this module's.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from tui.engine.config import WorkloadConfig
from tui.engine.workload.lengths import ScenarioPicker, draw_length
from tui.engine.workload.protocol import RequestKey, RequestSpec
from tui.engine.workload.text import UNIQUE_HEAD_WORDS, WordText, unique_head

if TYPE_CHECKING:
    from tui.engine.records import RequestRecord


def longest_isl(config: WorkloadConfig) -> int:
    """The most input tokens any request of ``config`` can ask for (synthetic workloads)."""
    if config.scenarios:
        return max(s.isl for s in config.scenarios)
    if config.isl_dist is not None:
        return config.isl_dist.hi
    return config.isl


def shortest_isl(config: WorkloadConfig) -> int:
    """The fewest input tokens any request of ``config`` can ask for (synthetic workloads)."""
    if config.scenarios:
        return min(s.isl for s in config.scenarios)
    if config.isl_dist is not None:
        return config.isl_dist.lo
    return config.isl


class ShapedWorkload:
    """Per request: draw (ISL, OSL), then a prompt of ISL words whose first words are its own."""

    wants_replies = False
    """Each prompt depends on (seed, worker, seq) only."""

    def __init__(self, config: WorkloadConfig) -> None:
        self.config = config
        self._picker = ScenarioPicker(config.scenarios) if config.scenarios else None
        self._body = WordText(f"{config.seed}:shaped-body", longest_isl(config))

    def lengths(self, key: RequestKey) -> tuple[int, int, random.Random]:
        """(ISL, OSL) for request ``key``, and the generator that drew them (it goes on to draw the text)."""
        cfg = self.config
        rng = random.Random(f"{cfg.seed}:{key.worker}:{key.seq}:shaped")
        if self._picker is not None:
            s = self._picker.pick(rng)
            return s.isl, s.osl, rng
        isl = cfg.isl if cfg.isl_dist is None else draw_length(cfg.isl_dist, rng)
        osl = cfg.osl if cfg.osl_dist is None else draw_length(cfg.osl_dist, rng)
        return isl, osl, rng

    def next_request(self, key: RequestKey) -> RequestSpec:
        """Request ``key``: its drawn lengths, and a prompt of that many words."""
        isl, osl, rng = self.lengths(key)
        head = min(UNIQUE_HEAD_WORDS, isl)
        return RequestSpec(
            prompt=unique_head(rng, head) + self._body.first(isl - head),
            max_tokens=osl,
            fixed_osl=self.config.fixed_osl,
            expected_input_tokens=isl,
        )

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        """Nothing to learn from an answer."""
