"""Synthetic prompts whose lengths vary per request: ISL and OSL each fixed, normal or uniform, or a
weighted list of (ISL, OSL) scenarios (`--isl-dist`, `--osl-dist`, `--scenarios`).

Deterministic in (seed, worker, seq): the same seed asks for the same lengths, request by request. Each
drawn ISL is by the server's own count, as a fixed ``--isl`` is: the synthetic workload's `PromptSizer`
(the ISL probe's observations, then every answer's ``usage``, or ``--tokenizer``) says how many words make
it, so the text is the same for the same seed until the first answer, then follows the calibration.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from tui.engine.config import WorkloadConfig
from tui.engine.workload.lengths import ScenarioPicker, draw_length
from tui.engine.workload.protocol import RequestKey, RequestSpec
from tui.engine.workload.synthetic import PromptSizer
from tui.engine.workload.text import PREFIX_VOCAB, UNIQUE_HEAD_WORDS, WordText, salted, unique_head

if TYPE_CHECKING:
    from tui.engine.records import RequestRecord


def is_shaped(config: WorkloadConfig) -> bool:
    """True when ``config`` draws its lengths per request (then `ShapedWorkload` makes its prompts)."""
    return config.isl_dist is not None or config.osl_dist is not None or bool(config.scenarios)


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
    """Per request: draw (ISL, OSL), then a prompt of that many tokens whose first words are its own."""

    wants_replies = False
    """Each prompt depends on (seed, worker, seq) and the calibration only, never on an answer's text."""

    def __init__(self, config: WorkloadConfig, *, borrowed: bool = False) -> None:
        """``borrowed``: see `PromptSizer`."""
        self.config = config
        self._picker = ScenarioPicker(config.scenarios) if config.scenarios else None
        # One-token words: with words of 1 or 2 tokens a prompt's cost wanders off any line as it grows
        # (+-5 tokens at 40-240 on the simulator), so no word count could hit each drawn ISL. Room for the
        # calibration to ask for more words than tokens, and for a tokenizer's cut.
        self._body = WordText(f"{config.seed}:shaped-body", 2 * longest_isl(config) + 16, PREFIX_VOCAB)
        self.sizer = PromptSizer(config, borrowed=borrowed)

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
        """Request ``key``: its drawn lengths, and a prompt that costs the drawn ISL (once calibrated)."""
        isl, osl, rng = self.lengths(key)

        salt = self.config.prompt_salt
        # the head words under the run's salt, from their own generator: the lengths stay the seed's
        head_rng = random.Random(salted(salt, f"{self.config.seed}:{key.worker}:{key.seq}")) if salt else rng

        def text(words: int) -> str:
            head = min(UNIQUE_HEAD_WORDS, words)
            return unique_head(head_rng, head, PREFIX_VOCAB) + self._body.first(words - head)

        prompt = self.sizer.prompt(key.seq, isl, text)
        return RequestSpec(
            prompt=prompt, max_tokens=osl, fixed_osl=self.config.fixed_osl, expected_input_tokens=isl
        )

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        """Learn the prompt's real cost from the server's ``usage`` (`PromptSizer.learn`)."""
        self.sizer.learn(key.seq, record)
