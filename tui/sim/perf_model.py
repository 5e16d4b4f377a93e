"""The simulator's performance model: named profiles, a step-time roofline, a continuous-batching scheduler.

Pure code: no I/O, no clocks, no asyncio. The server (`tui.sim.server`) asks the `Scheduler` for one engine
step at a time, sleeps for the step's modelled duration, then delivers the tokens that step produced.

How an engine step costs time
-----------------------------
A transformer forward pass reads every weight once (memory-bound) and does about 2 x params FLOPs per token in
the batch (compute-bound); the slower of the two sets the kernel time (a roofline). Attention also reads each
sequence's KV cache, so the memory side grows with the total context in the batch. On top sit a fixed cost per
step (scheduling, kernel launches, tensor-parallel all-reduce latency) and a CPU cost per sequence (sampling,
detokenising, streaming the output). That per-sequence cost, not arithmetic, is what makes real servers level
off at a few thousand tokens/s long before the GPU's FLOPs run out::

    step_s = step_overhead_s + per_seq_s * seqs
             + max(weights_s + kv_s_per_token * context_tokens,        # memory-bound (decode)
                   compute_s_per_token * (decode_tokens + prefill_tokens))  # compute-bound (prefill)

so a batch of one decodes at ~1/(overhead + weights) tokens/s, a batch of B at B/step_s: throughput rises with
B and saturates while each stream slows down. A long prefill in the same step is compute-bound and stalls
every decoding stream for its duration (an ITL spike), which is why servers chunk prefills.

How the scheduler admits work (vLLM-style)
-------------------------------------------
Requests wait FCFS. Each step first makes sure every running sequence can grow by one KV token (preempting the
most recently admitted by recompute if not), then gives each fully prefilled sequence one decode token, then
spends what is left of the per-step token budget on prefill chunks: first sequences already part-way through,
then new admissions while there is a free slot (`max_num_seqs`) and KV room for the whole context. A sequence
whose prefill completes in a step emits its first token at the end of that step. With chunked prefill off, a
step that admits anything is prefill-only and running streams skip a token (the classic ITL spike).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

# --- profiles -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Profile:
    """The parameters of one simulated deployment. Times are seconds at `time_scale` 1."""

    name: str
    description: str
    """One line for `tokentop sim --list-profiles`."""
    model: str
    """The model id served at /v1/models."""
    max_num_seqs: int
    """Most sequences running at once (vLLM `--max-num-seqs`, llama.cpp `-np`)."""
    kv_cache_tokens: int
    """KV cache capacity in tokens, shared by all running sequences."""
    max_model_len: int
    """Largest prompt + completion a request may ask for; larger gets a 400."""
    prefill_chunk_tokens: int | None
    """Tokens per step with chunked prefill (decode tokens count against it); None: prefill-only steps."""
    step_overhead_s: float
    """Fixed cost of every step: scheduling, kernel launches, TP all-reduce latency."""
    per_seq_s: float
    """CPU and kernel cost per sequence in the batch: sampling, detokenising, streaming the output."""
    weights_s: float
    """Time to read the weights once: parameter bytes / achieved memory bandwidth (per GPU under TP)."""
    kv_s_per_token: float
    """Time to read one token of KV cache during attention: KV bytes per token / achieved bandwidth."""
    compute_s_per_token: float
    """Time to compute one token: 2 x params FLOPs / achieved FLOP/s (all GPUs)."""
    eos_mean_tokens: float = 256.0
    """Mean answer length when a request lets the model stop at EOS (exponentially distributed)."""
    gpus: int = 0
    """GPUs the deployment runs on (0: none, a CPU server); `/metrics` then serves DCGM's names for each."""
    gpu_fb_mib: int = 81_559
    """Framebuffer per GPU, MiB (an H100 80 GB)."""

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1:
            raise ValueError("max_num_seqs must be at least 1")
        if self.max_model_len < 2:
            raise ValueError("max_model_len must be at least 2")
        if self.kv_cache_tokens <= self.max_model_len:
            # A lone request of max_model_len must always fit, or it could wait forever.
            raise ValueError(
                f"kv_cache_tokens ({self.kv_cache_tokens}) must exceed max_model_len ({self.max_model_len})"
            )
        if self.prefill_chunk_tokens is not None and self.prefill_chunk_tokens <= self.max_num_seqs:
            raise ValueError(
                f"the prefill chunk ({self.prefill_chunk_tokens} tokens) must exceed max seqs "
                f"({self.max_num_seqs}): each decoding sequence takes one token of it"
            )

    def with_overrides(
        self,
        *,
        max_num_seqs: int | None = None,
        kv_cache_tokens: int | None = None,
        prefill_chunk_tokens: int | None = None,
    ) -> Profile:
        """A copy with capacity limits changed (flags `--max-seqs`, `--kv-tokens`, `--prefill-chunk`).

        None keeps a value; `prefill_chunk_tokens=0` turns chunked prefill off. ValueError if inconsistent.
        """
        profile = self
        if max_num_seqs is not None:
            profile = replace(profile, max_num_seqs=max_num_seqs)
        if kv_cache_tokens is not None:
            max_len = min(profile.max_model_len, kv_cache_tokens - 1)
            profile = replace(profile, kv_cache_tokens=kv_cache_tokens, max_model_len=max_len)
        if prefill_chunk_tokens is not None:
            profile = replace(profile, prefill_chunk_tokens=prefill_chunk_tokens or None)
        return profile


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        # Llama-3-8B, bf16, one H100 SXM 80 GB, vLLM-like. Weights 16 GB at ~2.7 TB/s achieved (of 3.35):
        # 6 ms; KV 128 KiB/token (32 layers x 8 KV heads x 128 dims x 2 x 2 B) = 48 ns/token to read;
        # 16 GFLOP/token at ~400 TFLOP/s achieved (40% of 989) = 40 us/token, so a 128-token prefill costs
        # ~5 ms and 2,048 ~82 ms.
        # KV room: 80 GB x 0.9 - 16 GB weights - ~4 GB activations = ~52 GB / 128 KiB = ~400k tokens.
        # Gives ~140 tok/s for one stream (published: 100-150) and ~4,500 tok/s at 64 streams, ~6,000 at the
        # 128-sequence cap (published vLLM H100 8B serving curves level off at a few thousand tok/s out).
        Profile(
            name="small-gpu",
            description="Llama-3-8B on one H100: ~140 tok/s per stream, levels off near 6k tok/s at 128 seqs",
            model="sim-llama-3-8b",
            max_num_seqs=128,
            kv_cache_tokens=400_000,
            max_model_len=8192,
            prefill_chunk_tokens=2048,
            step_overhead_s=0.001,
            per_seq_s=0.0001,
            weights_s=0.006,
            kv_s_per_token=4.8e-8,
            compute_s_per_token=4.0e-5,
            eos_mean_tokens=256.0,
            gpus=1,
        ),
        # Llama-3-70B, bf16, tensor-parallel over 4 H100s. 140 GB / 4 = 35 GB per GPU; at the ~55% bandwidth
        # efficiency small TP shards reach that is 18 ms, plus ~8 ms per step of launches and 160 all-reduces
        # (80 layers x 2). KV 320 KiB/token split over 4 GPUs = 30 ns/token; 140 GFLOP/token over 4 x 400
        # TFLOP/s = 88 us/token. KV room: 4 x 72 GB - 140 GB - ~12 GB = ~136 GB / 320 KiB = ~400k tokens.
        # Gives ~38 tok/s for one stream (published 70B TP4: 30-40) and ~1,800 at 64, ~2,700 at 128.
        Profile(
            name="large-model",
            description="Llama-3-70B on 4 H100s (TP=4): ~38 tok/s per stream, levels off near 2.7k tok/s",
            model="sim-llama-3-70b",
            max_num_seqs=128,
            kv_cache_tokens=400_000,
            max_model_len=8192,
            prefill_chunk_tokens=2048,
            step_overhead_s=0.008,
            per_seq_s=0.00015,
            weights_s=0.018,
            kv_s_per_token=3.0e-8,
            compute_s_per_token=8.8e-5,
            eos_mean_tokens=320.0,
            gpus=4,
        ),
        # A ~270M model quantised to 4 bits under llama.cpp on one CPU thread, calibrated on this project's
        # reference machine (shared/realserver: gemma-3-270m Q4_K_M, 2 cores, -t 1, 4 slots, 4,096 KV tokens):
        # ~0.5 s to first token for a 100-token prompt (5 ms/token), ~35 tok/s for one stream, ~70 in all with
        # 4 slots. On a CPU decode is compute-bound per sequence, hence the large per_seq_s.
        Profile(
            name="tiny-cpu",
            description="a 270M model under llama.cpp on one CPU core: ~30 tok/s, 4 slots, ~70 tok/s in all",
            model="sim-gemma-3-270m",
            max_num_seqs=4,
            kv_cache_tokens=4096,
            max_model_len=4095,
            prefill_chunk_tokens=512,
            step_overhead_s=0.002,
            per_seq_s=0.008,
            weights_s=0.025,
            kv_s_per_token=0.0,
            compute_s_per_token=0.005,
            eos_mean_tokens=128.0,
        ),
        # No batching cost at all: every stream gets one token per 20 ms (50 tok/s x time_scale) at any load,
        # and prompts are free. Not a real server: a fixed, known token rate for calibrating the client's own
        # timing error and for measuring how many streams the simulator itself can serve.
        Profile(
            name="flat",
            description="no batching cost: 50 tok/s (x time-scale) per stream at any load; calibration",
            model="sim-flat",
            max_num_seqs=100_000,
            kv_cache_tokens=1_000_000_000,
            max_model_len=1_000_000,
            prefill_chunk_tokens=1_000_000_000,  # never delays a decode
            step_overhead_s=0.02,
            per_seq_s=0.0,
            weights_s=0.0,
            kv_s_per_token=0.0,
            compute_s_per_token=0.0,
            eos_mean_tokens=256.0,
        ),
    )
}
"""The named profiles, in `--list-profiles` order."""


def get_profile(name: str) -> Profile:
    """The profile called `name`; ValueError naming the choices otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown sim profile {name!r} (choose from: {', '.join(PROFILES)})") from None


# --- the roofline -------------------------------------------------------------------------------------------


def step_time_s(
    profile: Profile, *, seqs: int, decode_tokens: int, prefill_tokens: int = 0, context_tokens: int = 0
) -> float:
    """Modelled duration of one engine step (at time_scale 1).

    `seqs` sequences take part (decoding or prefilling), producing `decode_tokens` decode tokens and computing
    `prefill_tokens` prompt tokens, while attention reads `context_tokens` tokens of KV cache in all.
    """
    if seqs <= 0 and prefill_tokens <= 0:
        return 0.0
    memory_s = profile.weights_s + profile.kv_s_per_token * context_tokens
    compute_s = profile.compute_s_per_token * (decode_tokens + prefill_tokens)
    return profile.step_overhead_s + profile.per_seq_s * seqs + max(memory_s, compute_s)


def decode_tokens_per_s(profile: Profile, batch: int, context_per_seq: int = 512) -> float:
    """Steady-state output tokens/s of `batch` streams all decoding, each with `context_per_seq` context."""
    if batch <= 0:
        return 0.0
    step_s = step_time_s(profile, seqs=batch, decode_tokens=batch, context_tokens=batch * context_per_seq)
    return batch / step_s


# --- the scheduler ------------------------------------------------------------------------------------------

WAITING, RUNNING, FINISHED, ABORTED = 0, 1, 2, 3


class Seq:
    """One sequence's scheduling state. The server subclasses it to carry the request."""

    __slots__ = (
        "context_kv",
        "generated",
        "prefill_left",
        "prompt_tokens",
        "seq_id",
        "state",
        "target_tokens",
    )

    def __init__(self, seq_id: int, prompt_tokens: int, target_tokens: int) -> None:
        if prompt_tokens < 1 or target_tokens < 1:
            raise ValueError("a sequence needs at least one prompt token and one token to generate")
        self.seq_id = seq_id
        self.prompt_tokens = prompt_tokens
        self.target_tokens = target_tokens
        """Completion tokens to generate before the sequence finishes."""
        self.generated = 0
        self.prefill_left = 0
        """Context still to prefill before this sequence can emit (prompt, plus output after preemption)."""
        self.context_kv = 0
        """KV tokens held while running: prompt + generated."""
        self.state = WAITING


S = TypeVar("S", bound=Seq)


@dataclass
class Step(Generic[S]):
    """One engine step, already applied by the scheduler; the server delivers `emitted` at its end."""

    duration_s: float
    """Modelled duration at time_scale 1."""
    emitted: list[S] = field(default_factory=list)
    """Sequences that produce one token at the end of this step (their `generated` already counts it)."""
    admitted: list[S] = field(default_factory=list)
    preempted: list[S] = field(default_factory=list)
    seqs: int = 0
    prefilled: int = 0
    """How many of `emitted` finished a prefill this step (their first token, or the first after a
    preemption); the rest are decode tokens, one step after the sequence's previous token."""
    decode_tokens: int = 0
    prefill_tokens: int = 0
    context_tokens: int = 0


class Scheduler(Generic[S]):
    """FCFS continuous batching with a slot limit and a KV-cache token budget (see the module docstring)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.waiting: deque[S] = deque()
        self.running: list[S] = []
        self.kv_used = 0
        """KV tokens held by running sequences: the sum of their `context_kv`."""
        self.preemptions = 0
        self._stale_waiting = 0
        """Aborted sequences still in `waiting` (dropped lazily at the head), so `num_waiting` stays exact."""

    # -- queries --

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    @property
    def num_waiting(self) -> int:
        """Sequences waiting for a slot, aborted ones excluded (what vLLM's waiting gauge counts)."""
        return len(self.waiting) - self._stale_waiting

    def _drop_stale_head(self) -> None:
        """Pop aborted sequences off the head of the queue."""
        while self.waiting and self.waiting[0].state != WAITING:
            self.waiting.popleft()
            self._stale_waiting -= 1

    @property
    def kv_usage(self) -> float:
        """Fraction of the KV cache held, 0..1."""
        return self.kv_used / self.profile.kv_cache_tokens

    def would_wait(self, prompt_tokens: int) -> int:
        """How many requests would wait (this one included) if one of `prompt_tokens` arrived now."""
        free_slots = self.profile.max_num_seqs - len(self.running)
        kv_free = self.profile.kv_cache_tokens - self.kv_used - len(self.running)
        queue = [s.prompt_tokens + s.generated for s in self.waiting if s.state == WAITING]
        queue.append(prompt_tokens)
        for i, context in enumerate(queue):
            if free_slots <= 0 or context + 1 > kv_free:
                return len(queue) - i  # FCFS: everyone behind a blocked request waits too
            free_slots -= 1
            kv_free -= context + 1
        return 0

    # -- commands --

    def add(self, seq: S) -> None:
        """Queue a new sequence; it is admitted at the next step that has room."""
        if seq.prompt_tokens + seq.target_tokens > self.profile.max_model_len:
            raise ValueError("sequence longer than max_model_len")
        seq.state = WAITING
        self.waiting.append(seq)

    def abort(self, seq: S) -> None:
        """Drop a sequence (client gone): frees its slot and KV at once. Idempotent."""
        if seq.state == RUNNING:
            self.running.remove(seq)
            self.kv_used -= seq.context_kv
            seq.context_kv = 0
        elif seq.state == WAITING:
            self._stale_waiting += 1  # a waiting one is skipped lazily
        seq.state = ABORTED

    def step(self) -> Step[S] | None:
        """Plan and apply one engine step; None when there is nothing to do."""
        self._drop_stale_head()
        if self.idle:
            return None
        step: Step[S] = Step(0.0)
        self._make_room(step)
        if self.profile.prefill_chunk_tokens is None:
            self._plan_unchunked(step)
        else:
            self._plan_chunked(step, self.profile.prefill_chunk_tokens)
        if not step.emitted and not step.prefill_tokens:
            return None  # cannot happen with a valid profile; guards the server's loop against spinning
        step.duration_s = step_time_s(
            self.profile,
            seqs=step.seqs,
            decode_tokens=step.decode_tokens,
            prefill_tokens=step.prefill_tokens,
            context_tokens=step.context_tokens,
        )
        finished = False
        for s in step.emitted:
            s.generated += 1
            s.context_kv += 1
            self.kv_used += 1
            if s.generated >= s.target_tokens:
                s.state = FINISHED
                self.kv_used -= s.context_kv
                s.context_kv = 0
                finished = True
        if finished:
            self.running = [s for s in self.running if s.state == RUNNING]
        return step

    # -- internals --

    def _make_room(self, step: Step[S]) -> None:
        """Preempt (recompute) the newest sequences until every running one can grow by a token."""
        while self.running and self.kv_used + len(self.running) > self.profile.kv_cache_tokens:
            s = self.running.pop()
            self.kv_used -= s.context_kv
            s.context_kv = 0
            s.prefill_left = 0
            s.state = WAITING
            self.waiting.appendleft(s)
            self.preemptions += 1
            step.preempted.append(s)

    def _can_admit(self, s: S) -> bool:
        if len(self.running) >= self.profile.max_num_seqs:
            return False
        context = s.prompt_tokens + s.generated
        # +1 per running sequence (including s) so that this step's tokens fit without preempting.
        return self.kv_used + len(self.running) + context + 1 <= self.profile.kv_cache_tokens

    def _admit(self, step: Step[S]) -> S:
        s = self.waiting.popleft()
        context = s.prompt_tokens + s.generated
        s.state = RUNNING
        s.prefill_left = context
        s.context_kv = context
        self.kv_used += context
        self.running.append(s)
        step.admitted.append(s)
        return s

    def _plan_chunked(self, step: Step[S], budget: int) -> None:
        partial: list[S] = []
        for s in self.running:
            if s.prefill_left == 0:
                step.emitted.append(s)
                step.context_tokens += s.context_kv
            else:
                partial.append(s)
        step.decode_tokens = len(step.emitted)
        step.seqs = len(step.emitted)
        budget -= step.decode_tokens
        for s in partial:
            if budget <= 0:
                return
            budget = self._prefill_chunk(step, s, budget)
        while budget > 0:
            self._drop_stale_head()
            if not self.waiting or not self._can_admit(self.waiting[0]):
                return
            budget = self._prefill_chunk(step, self._admit(step), budget)

    def _prefill_chunk(self, step: Step[S], s: S, budget: int) -> int:
        chunk = min(budget, s.prefill_left)
        s.prefill_left -= chunk
        step.prefill_tokens += chunk
        step.seqs += 1
        step.context_tokens += s.context_kv - s.prefill_left
        if s.prefill_left == 0:
            step.emitted.append(s)
            step.prefilled += 1
        return budget - chunk

    def _plan_unchunked(self, step: Step[S]) -> None:
        """Prefill-only step if the queue head fits (running streams skip a token), else a decode step."""
        budget = self.profile.max_model_len
        while self.waiting:
            head = self.waiting[0]
            if head.state != WAITING:
                self._drop_stale_head()
                continue
            context = head.prompt_tokens + head.generated
            if not self._can_admit(head) or (step.admitted and step.prefill_tokens + context > budget):
                break
            self._prefill_chunk(step, self._admit(step), context)
        if step.admitted:
            return
        for s in self.running:
            step.emitted.append(s)
            step.context_tokens += s.context_kv
        step.decode_tokens = step.seqs = len(step.emitted)
