"""The simulator's performance model and scheduler, as pure code: no server, no clock."""

from __future__ import annotations

import pytest

from tui.sim.perf_model import (
    FINISHED,
    PROFILES,
    Profile,
    Scheduler,
    Seq,
    decode_tokens_per_s,
    get_profile,
    step_time_s,
)
from tui.sim.prefix_cache import PrefixCache, block_hashes
from tui.sim.tokens import chat_prompt_tokens, chat_units, count_prompt_tokens, text_units

SMALL = PROFILES["small-gpu"]
REAL_PROFILES = [p for p in PROFILES.values() if p.name != "flat"]


def _run(sched: Scheduler[Seq], max_steps: int = 100_000) -> tuple[float, dict[int, float], dict[int, float]]:
    """Step until idle; return (total modelled seconds, first-token time and end time per seq_id)."""
    now = 0.0
    first: dict[int, float] = {}
    end: dict[int, float] = {}
    for _ in range(max_steps):
        step = sched.step()
        if step is None:
            return now, first, end
        now += step.duration_s
        for s in step.emitted:
            first.setdefault(s.seq_id, now)
            if s.state == FINISHED:
                end[s.seq_id] = now
        assert sched.kv_used <= sched.profile.kv_cache_tokens
        assert len(sched.running) <= sched.profile.max_num_seqs
    raise AssertionError("scheduler did not drain")


def _tiny(**changes: object) -> Profile:
    base = dict(
        name="t", description="", model="m", max_num_seqs=8, kv_cache_tokens=10_000, max_model_len=4000,
        prefill_chunk_tokens=512, step_overhead_s=0.001, per_seq_s=0.0001, weights_s=0.005,
        kv_s_per_token=1e-8, compute_s_per_token=1e-5,
    )  # fmt: skip
    base.update(changes)
    return Profile(**base)  # type: ignore[arg-type]


# --- the roofline -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", REAL_PROFILES, ids=lambda p: p.name)
def test_step_time_grows_with_batch_and_context(profile: Profile) -> None:
    times = [step_time_s(profile, seqs=b, decode_tokens=b, context_tokens=b * 512) for b in (1, 2, 8, 32, 64)]
    assert times == sorted(times) and times[0] < times[-1]
    by_context = [step_time_s(profile, seqs=8, decode_tokens=8, context_tokens=c) for c in (0, 4_000, 64_000)]
    if profile.kv_s_per_token:
        assert by_context[0] < by_context[1] < by_context[2]


def test_prefill_is_compute_bound_and_costs_per_token() -> None:
    short = step_time_s(SMALL, seqs=1, decode_tokens=0, prefill_tokens=16)
    long = step_time_s(SMALL, seqs=1, decode_tokens=0, prefill_tokens=2048)
    decode = step_time_s(SMALL, seqs=1, decode_tokens=1, context_tokens=16)
    assert short == pytest.approx(decode, rel=0.01)  # a short prompt hides under the weight read
    assert long == pytest.approx(SMALL.step_overhead_s + SMALL.per_seq_s + 2048 * SMALL.compute_s_per_token)


@pytest.mark.parametrize("profile", REAL_PROFILES, ids=lambda p: p.name)
def test_throughput_rises_with_batch_and_saturates(profile: Profile) -> None:
    one = decode_tokens_per_s(profile, 1)
    batch = min(64, profile.max_num_seqs)
    many = decode_tokens_per_s(profile, batch)
    assert one < many < 0.8 * batch * one  # more in all, far from linear
    assert many / batch < one  # each stream slows down


def test_flat_profile_gives_every_stream_the_same_rate() -> None:
    flat = PROFILES["flat"]
    assert decode_tokens_per_s(flat, 1) == pytest.approx(50.0)
    assert decode_tokens_per_s(flat, 1000, context_per_seq=4000) == pytest.approx(50_000.0)


def test_profiles_match_the_public_figures_they_cite() -> None:
    assert 100 <= decode_tokens_per_s(PROFILES["small-gpu"], 1) <= 150
    assert 2_000 <= decode_tokens_per_s(PROFILES["small-gpu"], 128) <= 10_000
    assert 30 <= decode_tokens_per_s(PROFILES["large-model"], 1) <= 40
    assert 25 <= decode_tokens_per_s(PROFILES["tiny-cpu"], 1) <= 40
    assert 50 <= decode_tokens_per_s(PROFILES["tiny-cpu"], 4) <= 80


def test_unknown_profile_names_the_choices() -> None:
    with pytest.raises(ValueError, match="small-gpu"):
        get_profile("nope")


def test_profile_rejects_a_kv_cache_smaller_than_one_request() -> None:
    with pytest.raises(ValueError, match="kv_cache_tokens"):
        _tiny(kv_cache_tokens=100, max_model_len=100)
    assert SMALL.with_overrides(kv_cache_tokens=1000).max_model_len == 999
    assert SMALL.with_overrides(prefill_chunk_tokens=0).prefill_chunk_tokens is None


# --- prompt tokens ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("hello", 2),  # 5 characters: ceil(5 / 4)
        ("the cat sat", 3),  # short words: one each
        ("hello there  world\n", 6),
        ("abcd", 1),
        ("abcdefgh", 2),
        ("abcdefghi", 3),
        ("x" * 80, 20),
        ("Hi, there!", 5),  # punctuation is a token of its own
    ],
)
def test_prompt_tokens_differ_from_words(text: str, tokens: int) -> None:
    assert count_prompt_tokens(text) == tokens


def test_chat_adds_template_tokens_per_message_and_for_the_reply() -> None:
    assert chat_prompt_tokens(["the cat"]) == 2 + 4 + 3
    assert chat_prompt_tokens(["be brief", "the cat"]) == (3 + 2) + 2 * 4 + 3


@pytest.mark.parametrize(
    "text", ["abcdefghi", "x" * 80, "Hi, there!", "  ", "a-b_c d", "ünïcödé_wörds 123456789 ¿qué?"]
)
def test_the_prefix_caches_tokens_are_the_counted_ones(text: str) -> None:
    assert len(text_units(text)) == count_prompt_tokens(text)
    assert len(chat_units([text, "be brief"])) == chat_prompt_tokens([text, "be brief"])


def test_prefix_cache_hits_whole_leading_blocks_and_forgets_the_oldest() -> None:
    cache = PrefixCache(capacity_blocks=4)
    a = block_hashes([str(i) for i in range(40)])  # two whole blocks, 8 tokens left over
    assert len(a) == 2 and cache.lookup_insert(a, 40) == 0 and cache.lookup_insert(a, 40) == 32
    assert cache.lookup_insert(a[:1], 16) == 15  # never the whole prompt: its last token is computed
    b = block_hashes(["x", *map(str, range(31))])  # differs in the first block: no hit at all
    assert cache.lookup_insert(b, 32) == 0
    assert cache.lookup_insert(a, 40) == 32  # still held (4 blocks: a's two and b's two)
    cache.lookup_insert(block_hashes(["y"] * 48), 48)  # three more blocks push out b's, the oldest used
    assert cache.lookup_insert(b, 32) == 0


# --- the scheduler ------------------------------------------------------------------------------------------


def test_kv_budget_caps_admission() -> None:
    sched: Scheduler[Seq] = Scheduler(
        _tiny(kv_cache_tokens=1000, max_model_len=900, prefill_chunk_tokens=2048)
    )
    for i in range(5):
        sched.add(Seq(i, prompt_tokens=300, target_tokens=2))
    step = sched.step()
    assert step is not None
    # each needs its 300-token context plus room to grow: three fit in 1,000, the fourth waits
    assert len(step.admitted) == 3
    assert sched.num_waiting == 2
    assert sched.would_wait(10) == 3  # the two queued plus a newcomer
    _, _, end = _run(sched)
    assert sorted(end) == [0, 1, 2, 3, 4]


def test_slot_limit_caps_admission_and_ttft_grows_with_the_queue() -> None:
    profile = _tiny(max_num_seqs=4)
    worst_ttft_s = []
    for n in (1, 4, 16):
        sched: Scheduler[Seq] = Scheduler(profile)
        for i in range(n):
            sched.add(Seq(i, prompt_tokens=32, target_tokens=20))
        assert sched.would_wait(32) == max(0, n + 1 - 4)
        _, first, _ = _run(sched)
        worst_ttft_s.append(max(first.values()))
    assert worst_ttft_s[0] <= worst_ttft_s[1] < worst_ttft_s[2]
    assert worst_ttft_s[2] > 3 * worst_ttft_s[1]  # the last of 16 waits for three batches of 20 tokens


def test_every_sequence_gets_exactly_its_tokens() -> None:
    sched: Scheduler[Seq] = Scheduler(_tiny())
    seqs = [Seq(i, prompt_tokens=10 + 37 * i, target_tokens=1 + 13 * i) for i in range(20)]
    for s in seqs:
        sched.add(s)
    emitted = {s.seq_id: 0 for s in seqs}
    for _ in range(10_000):
        step = sched.step()
        if step is None:
            break
        for s in step.emitted:
            emitted[s.seq_id] += 1
    assert emitted == {s.seq_id: s.target_tokens for s in seqs}
    assert sched.kv_used == 0 and sched.idle


def test_kv_pressure_preempts_the_newest_and_still_finishes_everyone() -> None:
    # Room to admit four short prompts, not for all of them to grow to 200 tokens.
    sched: Scheduler[Seq] = Scheduler(_tiny(kv_cache_tokens=500, max_model_len=300, max_num_seqs=8))
    for i in range(4):
        sched.add(Seq(i, prompt_tokens=50, target_tokens=200))
    _, _, end = _run(sched)
    assert sorted(end) == [0, 1, 2, 3]
    assert sched.preemptions > 0
    assert sched.kv_used == 0


def test_chunked_prefill_splits_a_long_prompt_while_others_keep_decoding() -> None:
    sched: Scheduler[Seq] = Scheduler(_tiny(prefill_chunk_tokens=512))
    decoder = Seq(0, prompt_tokens=8, target_tokens=50)
    sched.add(decoder)
    assert sched.step() is not None  # prefilled and first token
    long = Seq(1, prompt_tokens=1500, target_tokens=5)
    sched.add(long)
    chunks = []
    for _ in range(3):
        step = sched.step()
        assert step is not None
        assert decoder in step.emitted  # never skipped
        chunks.append(step.prefill_tokens)
    assert chunks == [511, 511, 478]  # the decode token takes one of the 512 each step
    assert long.generated == 1


def test_unchunked_prefill_step_skips_running_streams() -> None:
    sched: Scheduler[Seq] = Scheduler(_tiny(prefill_chunk_tokens=None))
    decoder = Seq(0, prompt_tokens=8, target_tokens=50)
    sched.add(decoder)
    sched.step()
    sched.add(Seq(1, prompt_tokens=1500, target_tokens=5))
    step = sched.step()
    assert step is not None
    assert step.prefill_tokens == 1500 and step.decode_tokens == 0
    assert decoder not in step.emitted  # the ITL spike chunked prefill avoids
    next_step = sched.step()
    assert next_step is not None and decoder in next_step.emitted


def test_abort_frees_slot_and_kv_at_once() -> None:
    sched: Scheduler[Seq] = Scheduler(_tiny(max_num_seqs=1))
    a, b = Seq(0, 100, 50), Seq(1, 100, 50)
    sched.add(a)
    sched.add(b)
    sched.step()
    assert a in sched.running and sched.num_waiting == 1
    sched.abort(a)
    assert sched.kv_used == 0 and not sched.running
    step = sched.step()
    assert step is not None and step.admitted == [b]
    sched.abort(b)
    sched.abort(b)  # idempotent
    assert sched.step() is None


def test_a_request_longer_than_the_context_is_refused() -> None:
    sched: Scheduler[Seq] = Scheduler(_tiny(max_model_len=100, kv_cache_tokens=200))
    with pytest.raises(ValueError):
        sched.add(Seq(0, prompt_tokens=90, target_tokens=20))
