"""Requests from a trace (`--trace`): each one's input and output length as the trace says, the input by the
server's count (`PromptSizer`, as every ISL here), and its prompt made of the trace's own blocks.

A Mooncake request names its prompt's blocks (``hash_ids``, ``--trace-block-size`` tokens each): block id h
is always the same text of one-token words within a run, so two requests with the same leading ids start with
the same text and a prefix cache hits on exactly what the trace shares; the run's prompt salt is in every
block, so an earlier run's replay of the same trace leaves nothing in the cache for this one. A request
without ids (Azure, BurstGPT) gets a text of its own from its first word.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import TYPE_CHECKING

from tui.engine.config import WorkloadConfig
from tui.engine.workload.protocol import RequestKey, RequestSpec
from tui.engine.workload.synthetic import PromptSizer
from tui.engine.workload.text import PREFIX_VOCAB, UNIQUE_HEAD_WORDS, WordText, unique_head

if TYPE_CHECKING:
    from tui.engine.records import RequestRecord
    from tui.engine.traces.protocol import TraceRequest

BLOCK_CACHE = 2048
"""Block texts kept (least recently used dropped): about 2.3 kB each at 512 tokens, so under 5 MB."""
TAIL_WORDS = 8192
"""The fixed text after a request's own head (no ids) or past its last block: longer prompts repeat it."""


class TraceWorkload:
    """Each request's lengths and blocks from its trace entry (`RequestKey.trace`)."""

    wants_replies = False

    def __init__(self, config: WorkloadConfig) -> None:
        if config.trace is None:
            raise ValueError("TraceWorkload needs WorkloadConfig.trace")
        self.config = config
        self.block_size = config.trace.block_size
        self.sizer = PromptSizer(config)
        self._blocks: OrderedDict[int, str] = OrderedDict()
        salt = config.prompt_salt
        self._seed = f"{config.seed}:{salt}" if salt else str(config.seed)
        """The seed and the run's prompt salt, which the text is drawn from."""
        self._tail = WordText(f"{config.seed}:trace-tail", TAIL_WORDS, PREFIX_VOCAB)

    def block(self, hash_id: int) -> str:
        """Block ``hash_id``'s text: ``block_size`` one-token words, each after a space, the same in every
        worker of a run (one seed and prompt salt)."""
        text = self._blocks.get(hash_id)
        if text is None:
            rng = random.Random(f"{self._seed}:block:{hash_id}")
            text = "".join(" " + w for w in rng.choices(PREFIX_VOCAB, k=self.block_size))
            self._blocks[hash_id] = text
            if len(self._blocks) > BLOCK_CACHE:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(hash_id)
        return text

    def text(self, entry: TraceRequest, key: RequestKey, words: int) -> str:
        """The first ``words`` words of ``entry``'s prompt."""
        if not entry.hash_ids:
            rng = random.Random(f"{self._seed}:{key.worker}:{key.seq}:trace")
            head = min(UNIQUE_HEAD_WORDS, words)
            return unique_head(rng, head, PREFIX_VOCAB) + self._tail_words(words - head)
        parts: list[str] = []
        left = words
        for hash_id in entry.hash_ids:
            if left <= 0:
                break
            block = self.block(hash_id)
            if left >= self.block_size:
                parts.append(block)
            else:
                parts.append(" " + " ".join(block.split()[:left]))
            left -= self.block_size
        if left > 0:  # the trace's length runs past its blocks: a text of this request's own
            rng = random.Random(f"{self._seed}:{key.worker}:{key.seq}:trace")
            parts.append(" " + unique_head(rng, min(UNIQUE_HEAD_WORDS, left), PREFIX_VOCAB))
            parts.append(self._tail_words(left - UNIQUE_HEAD_WORDS))
        return "".join(parts).lstrip()

    def _tail_words(self, n: int) -> str:
        if n <= 0:
            return ""
        whole, rest = divmod(n, self._tail.words)
        return self._tail.text * whole + self._tail.first(rest)

    def next_request(self, key: RequestKey) -> RequestSpec:
        """Request ``key``: its entry's output length, and a prompt of its input length by the server's count
        (once calibrated)."""
        entry = key.trace
        if entry is None:
            raise ValueError("a trace replay's request carries its trace entry")
        prompt = self.sizer.prompt(key.seq, entry.input_tokens, lambda n: self.text(entry, key, n))
        return RequestSpec(
            prompt=prompt,
            max_tokens=entry.output_tokens,
            fixed_osl=self.config.fixed_osl,
            expected_input_tokens=entry.input_tokens,
        )

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        """Learn the prompt's real cost from the server's ``usage`` (`PromptSizer.learn`)."""
        self.sizer.learn(key.seq, record)
