"""Synthetic prompts of common words, deterministic in (seed, worker, seq), sized to ``isl`` prompt tokens
*by the server's own count*.

Words are not tokens: a tokenizer splits long words and a chat template adds tokens around every message, so a
prompt of ``isl`` words costs more (Gemma 3 on llama.cpp: 209 tokens for 200 words). Without a tokenizer the
workload learns the cost from the server: every answer's ``usage.prompt_tokens`` for the words it sent feeds
an `IslCalibrator` (a line tokens = overhead + slope x words), which picks the next prompt's word count. A
probe before the run (`tui.engine.host.isl_probe`) can hand its observations over in
`WorkloadConfig.isl_observations` so the first requests are sized right too. With ``--tokenizer`` the text is
cut to the exact token count by a local tokenizer and only the template overhead is learned from ``usage``.

Until the first answer, every body is byte-identical to those tokentop sent before the workload seam existed
(`tests/unit/test_request_bodies.py` holds recorded hashes).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tui.engine.config import WorkloadConfig
from tui.engine.workload.local_tokenizer import LocalTokenizer, load_tokenizer
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
"""Short common words: one token each for most tokenizers (not all, nor by the simulator's rule: the
calibration measures what they cost)."""


def prompt_words(workload: WorkloadConfig, worker: int, seq: int, words: int | None = None) -> str:
    """A prompt of ``words`` words (default ``workload.isl``), deterministic in (seed, worker, seq).

    The first few words differ per request, and per run (drawn under the run's prompt salt), so a real
    server's prefix cache cannot turn the whole prompt into a cache hit (which would make TTFT meaningless);
    the rest is one fixed text per seed (a longer prompt extends a shorter one, so the token cost grows
    steadily with ``words``).
    """
    n = workload.isl if words is None else words
    key = f"{workload.seed}:{worker}:{seq}"
    head = random.Random(f"{workload.prompt_salt}:{key}" if workload.prompt_salt else key).choices(
        _VOCAB, k=min(4, n)
    )
    return " ".join(head) + _body_text(workload.seed, max(0, n - len(head)))


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


MAX_PROMPT_FACTOR = 4
"""No prompt is sized past this many words (or text tokens) per asked token, whatever a calibration says: a
server whose counts are wrong must not make the client send prompts hundreds of times the ISL asked for."""
MIN_TOKENS_PER_WORD = 0.25
"""A count below this many tokens per word sent is not a count (no tokenizer packs four short common words
into one token): such an answer is not learned from."""
GROWTH_WORDS = 8
"""Two prompts this many words apart or more must cost different token counts, the longer more."""


def plausible(points: Sequence[tuple[int, int]], words: int, tokens: int) -> bool:
    """Whether ``tokens`` for ``words`` is a count to learn from, beside the ``points`` learned so far: at
    least `MIN_TOKENS_PER_WORD` per word, and growing with the prompt (no prompt `GROWTH_WORDS` or more
    words longer than another costs as many tokens or fewer)."""
    if tokens < MIN_TOKENS_PER_WORD * words:
        return False
    return all((tokens - t) * (words - w) > 0 for w, t in points if abs(words - w) >= GROWTH_WORDS)


CALIBRATION_WINDOW = 16
"""The overhead is the mean over this many latest observations: enough to average out the per-request head
words, few enough that the uncalibrated first requests (far from the target length) soon drop out."""


class IslCalibrator:
    """Chooses how many words make a prompt of N tokens on this server, from what it reported so far.

    The model is a line, tokens = overhead + slope x words. The first observation gives a slope assuming no
    overhead; the first observation at a second word count gives the slope by the secant (then it stays: it
    is the tokenizer's mean cost per word, which does not drift). The overhead (chat template, BOS, the
    per-request head words) is the mean of ``tokens - slope x words`` over the last `CALIBRATION_WINDOW`
    observations, so each answer stands on its own: answers that come back late, for prompts sized before an
    update, are still read right. The ideal word count is fractional; requests alternate between its floor
    and ceiling (error diffusion) so the *mean* lands on N even where one word costs 2 tokens.

    Converges in 2 to 3 answers on a tokenizer that is linear in words (the simulator's rule), and to within a
    token in a few more where words vary in cost.
    """

    def __init__(self) -> None:
        self.slope: float | None = None
        self._first: tuple[int, int] | None = None
        self._offsets: deque[float] = deque(maxlen=CALIBRATION_WINDOW)
        self.points: deque[tuple[int, int]] = deque(maxlen=CALIBRATION_WINDOW)
        self._carry = 0.0
        self._slope_fixed = False
        self.observations = 0
        """Answers learned from."""

    def words_for(self, isl: int) -> float | None:
        """The (fractional) word count expected to cost ``isl`` tokens (any length: the line holds for all);
        None before the first answer."""
        if self.slope is None or not self._offsets:
            return None
        overhead = sum(self._offsets) / len(self._offsets)
        return max(0.0, (isl - overhead) / self.slope)

    def observe(self, words: int, tokens: int) -> None:
        """The server counted ``tokens`` prompt tokens for a prompt of ``words`` words."""
        if words <= 0 or tokens <= 0:
            return
        self.observations += 1
        if self._first is None:
            self._first = (words, tokens)
            self.slope = tokens / words
        elif not self._slope_fixed and words != self._first[0] and tokens != self._first[1]:
            w0, t0 = self._first
            self.slope = min(8.0, max(0.1, (tokens - t0) / (words - w0)))
            self._slope_fixed = True
            self._offsets.clear()
            self._offsets.extend(t - self.slope * w for w, t in self.points)
        self.points.append((words, tokens))
        slope = self.slope
        assert slope is not None
        self._offsets.append(tokens - slope * words)

    def forget_overhead(self) -> None:
        """Keep the cost per word (the text's, whatever surrounds it) once it is measured, forget the rest:
        for prompts of another kind, whose template differs, from their first answer on."""
        self._offsets.clear()
        self.points.clear()
        if not self._slope_fixed:
            self._first = None
            self.slope = None

    def next_words(self, isl: int) -> int:
        """Words for the next prompt of ``isl`` tokens: ``isl`` before any answer, then the floor or ceiling
        of the target, alternating so their mean is the target (over prompts of different lengths too: the
        carry is what the earlier ones fell short)."""
        target = self.words_for(isl)
        if target is None:
            return isl
        low = math.floor(target)
        self._carry += target - low
        if self._carry >= 1.0:
            self._carry -= 1.0
            return low + 1
        return low


class PromptSizer:
    """What a prompt of N tokens by the server's count is made of, learned from its ``usage``: a word count
    (`IslCalibrator`), or with ``--tokenizer`` a text cut to N less the template's tokens. One per
    workload; the synthetic prompts ask for one N, shaped ones for a new N each request."""

    def __init__(self, config: WorkloadConfig, *, borrowed: bool = False) -> None:
        """``borrowed``: ``config.isl_observations`` were made for prompts of another kind (a conversation's
        first turns, for its later ones): they size the first prompts, and only their cost per word is
        kept once this workload's own first answer comes."""
        self.calibrator = IslCalibrator()
        self._borrowed = borrowed and bool(config.isl_observations)
        self.tokenizer: LocalTokenizer | None = (
            load_tokenizer(config.tokenizer) if config.tokenizer is not None else None
        )
        self._sent: dict[int, int] = {}
        """seq -> words (or, with a tokenizer, text tokens) of each request in flight."""
        self._overheads: deque[int] = deque(maxlen=CALIBRATION_WINDOW)
        """With a tokenizer: server tokens minus text tokens (template, BOS) of the latest answers."""
        self.observed: deque[tuple[int, int]] = deque(maxlen=CALIBRATION_WINDOW)
        """The latest (words, or text tokens with a tokenizer; the server's prompt tokens) pairs learned from:
        what a probe hands to the workers (`WorkloadConfig.isl_observations`)."""
        self.refused: tuple[int, int] | None = None
        """The latest (words, tokens) answer not learned from: a count that is no count (`plausible`)."""
        for words, tokens in config.isl_observations:
            self._learn(words, tokens)

    def _learn(self, words: int, tokens: int) -> None:
        if not plausible(self.observed, words, tokens):
            self.refused = (words, tokens)
            return
        self.observed.append((words, tokens))
        if self.tokenizer is not None:
            self._overheads.append(tokens - words)
        else:
            self.calibrator.observe(words, tokens)

    def prompt(self, seq: int, isl: int, text: Callable[[int], str]) -> str:
        """Request ``seq``'s prompt of ``isl`` tokens, from ``text(words)`` (the workload's own text of that
        many words): as many words as the calibration says, or with a tokenizer a longer text cut to the
        tokens that leave room for the template."""
        n = self._size(seq, isl)
        if self.tokenizer is not None:
            return self.tokenizer.exact_text(text(2 * n + 8), n)
        return text(n)

    def _size(self, seq: int, isl: int) -> int:
        """How many words (with a tokenizer: text tokens) request ``seq``'s prompt of ``isl`` tokens gets;
        remembered until its answer says what it cost."""
        if self.tokenizer is not None:
            overhead = round(sum(self._overheads) / len(self._overheads)) if self._overheads else 0
            n = max(1, isl - overhead)
        else:
            n = self.calibrator.next_words(isl)
        n = min(n, MAX_PROMPT_FACTOR * max(1, isl))
        if len(self._sent) > 65_536:  # answers that never came (a bug elsewhere): stay bounded
            self._sent.clear()
        self._sent[seq] = n
        return n

    def learn(self, seq: int, record: RequestRecord) -> None:
        """Learn request ``seq``'s real cost from the server's ``usage`` (a failed request that reported it
        counts too: the prompt was tokenized all the same)."""
        n = self._sent.pop(seq, None)
        if n is not None and record.input_source == "usage" and record.input_tokens:
            if self._borrowed:
                self._borrowed = False
                self.calibrator.forget_overhead()
                self._overheads.clear()
            self._learn(n, record.input_tokens)


class SyntheticWorkload:
    """Prompts of about ``isl`` tokens (by the server's count, once calibrated) asking for ``osl`` tokens:
    every request alike but for its first words."""

    wants_replies = False
    """Each prompt depends on (seed, worker, seq) and the calibration only, never on an answer's text."""

    def __init__(self, config: WorkloadConfig, *, borrowed: bool = False) -> None:
        """``borrowed``: see `PromptSizer`."""
        self.config = config
        self.expected_input_tokens = config.isl
        """What the prompt costs when the server reports no usage: the target."""
        self.sizer = PromptSizer(config, borrowed=borrowed)

    def next_request(self, key: RequestKey) -> RequestSpec:
        """Request ``key``'s prompt, deterministic in (seed, worker, seq) and what the server said so far."""
        cfg = self.config
        prompt = self.sizer.prompt(key.seq, cfg.isl, lambda n: prompt_words(cfg, key.worker, key.seq, n))
        return RequestSpec(
            prompt=prompt,
            max_tokens=cfg.osl,
            fixed_osl=cfg.fixed_osl,
            expected_input_tokens=self.expected_input_tokens,
        )

    def on_response(
        self, key: RequestKey, spec: RequestSpec, reply_text: str | None, record: RequestRecord
    ) -> None:
        """Learn the prompt's real cost from the server's ``usage`` (`PromptSizer.learn`)."""
        self.sizer.learn(key.seq, record)
