"""Today's synthetic prompts: about ``isl`` common words, deterministic in (seed, worker, seq).

The request bodies are byte-identical to those tokentop sent before the workload seam existed
(`tests/unit/test_request_bodies.py` holds recorded hashes).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from tui.engine.config import WorkloadConfig
from tui.engine.workload.protocol import RequestKey, RequestSpec

if TYPE_CHECKING:
    from tui.engine.records import RequestRecord

_WORDS = """
time year people way day man thing woman life child world school state family student group country
problem hand part place case week company system program question work government number night point
home water room mother area money story fact month lot right study book eye job word business issue
side kind head house service friend father power hour game line end member law car city community
name president team minute idea kid body information back parent face others level office door
health person art war history party result change morning reason research girl guy moment air
teacher force education foot boy age policy process music market sense nation plan college interest
death experience effect use class control care field development role effort rate heart drug show
leader light voice wife police mind price report decision son view relationship town road arm
difference value building action model season society tax director position player record paper
space ground form event official matter center couple site project activity star table need court
oil situation cost industry figure street image phone data picture practice piece land product
doctor wall patient worker news test movie north love support technology step baby computer type
attention film tree source organization hair window evidence population truth song theory rock bank
church river garden summer winter stone bridge cloud island
"""
_VOCAB: tuple[str, ...] = tuple(w for w in _WORDS.split() if len(w) <= 8)
"""Short common words: one token each for most tokenizers (and by the simulator's rule)."""


def prompt_words(workload: WorkloadConfig, worker: int, seq: int) -> str:
    """A prompt of about ``workload.isl`` words (the simulator counts one token per word), deterministic in
    (seed, worker, seq).

    The first few words differ per request so a real server's prefix cache cannot turn the whole prompt into
    a cache hit (which would make TTFT meaningless); the rest is one fixed text per seed.
    """
    head = random.Random(f"{workload.seed}:{worker}:{seq}").choices(_VOCAB, k=min(4, workload.isl))
    return " ".join(head) + _body_text(workload.seed, max(0, workload.isl - len(head)))


_BODY_CACHE: dict[tuple[int, int], str] = {}


def _body_text(seed: int, words: int) -> str:
    """The fixed part of every prompt for one seed, made once: drawing ``words`` words per request would cost
    more than the rest of building it."""
    key = (seed, words)
    text = _BODY_CACHE.get(key)
    if text is None:
        rng = random.Random(seed)
        text = "".join(" " + w for w in rng.choices(_VOCAB, k=words))
        if len(_BODY_CACHE) > 8:
            _BODY_CACHE.clear()
        _BODY_CACHE[key] = text
    return text


class SyntheticWorkload:
    """Prompts of ``isl`` words asking for ``osl`` tokens: every request alike but for its first words."""

    wants_replies = False
    """Each prompt depends on (seed, worker, seq) only, never on an answer."""

    def __init__(self, config: WorkloadConfig) -> None:
        self.config = config
        self.expected_input_tokens = config.isl
        """What the prompt costs when the server reports no usage: one token per word."""

    def next_request(self, key: RequestKey) -> RequestSpec:
        """Request ``key``'s prompt, deterministic in (seed, worker, seq)."""
        cfg = self.config
        return RequestSpec(
            prompt=prompt_words(cfg, key.worker, key.seq),
            max_tokens=cfg.osl,
            fixed_osl=cfg.fixed_osl,
            expected_input_tokens=self.expected_input_tokens,
        )

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        """Nothing to learn from an answer."""
