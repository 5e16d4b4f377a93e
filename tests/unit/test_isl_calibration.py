"""The synthetic workload sizes prompts by the server's count: against the simulator's tokenizer rule
(which is not one token per word), the mean ISL lands within a token of the target after a few answers."""

from __future__ import annotations

from collections import deque

import pytest

from tui.engine.config import WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.workload import RequestKey, RequestSpec, SyntheticWorkload
from tui.sim.tokens import chat_prompt_tokens, count_prompt_tokens


def server_count(spec: RequestSpec, chat: bool) -> int:
    """What the simulator reports as ``usage.prompt_tokens`` for this prompt."""
    assert spec.prompt is not None
    return chat_prompt_tokens([spec.prompt]) if chat else count_prompt_tokens(spec.prompt)


def answer(workload: SyntheticWorkload, key: RequestKey, spec: RequestSpec, tokens: int) -> None:
    record = RequestRecord(request_id=key.seq + 1, worker=key.worker, seq=key.seq, level_id=1, sent_ns=0)
    record.input_tokens, record.input_source = tokens, "usage"
    workload.on_response(key, spec, None, record)


def run(isl: int, chat: bool, requests: int, in_flight: int = 1) -> list[int]:
    """Send ``requests`` with ``in_flight`` outstanding at a time (answers come back oldest first)."""
    workload = SyntheticWorkload(WorkloadConfig(isl=isl, osl=8))
    pending: deque[tuple[RequestKey, RequestSpec]] = deque()
    seen: list[int] = []
    for seq in range(requests):
        key = RequestKey(0, seq)
        pending.append((key, workload.next_request(key)))
        if len(pending) >= in_flight:
            k, spec = pending.popleft()
            seen.append(server_count(spec, chat))
            answer(workload, k, spec, seen[-1])
    return seen


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completions"])
@pytest.mark.parametrize("isl", [64, 200, 1000])
def test_mean_isl_within_one_token_after_three_answers(isl: int, chat: bool) -> None:
    seen = run(isl, chat, 40)
    assert abs(seen[0] - isl) > 5, "the words-as-tokens guess must be wrong, or this proves nothing"
    after = seen[3:]
    assert abs(sum(after) / len(after) - isl) <= 1.0, seen
    assert max(abs(t - isl) for t in after) <= max(4, isl // 50), seen


@pytest.mark.parametrize("isl", [64, 1000])
def test_late_answers_of_many_in_flight_still_converge(isl: int) -> None:
    seen = run(isl, True, 120, in_flight=16)
    after = seen[40:]
    assert abs(sum(after) / len(after) - isl) <= 1.0


def test_observations_from_a_probe_size_the_first_request() -> None:
    probe = SyntheticWorkload(WorkloadConfig(isl=200, osl=1))
    for seq in range(6):
        key = RequestKey(0, seq)
        spec = probe.next_request(key)
        answer(probe, key, spec, server_count(spec, True))
    observations = tuple(probe.sizer.calibrator.points)
    workload = SyntheticWorkload(WorkloadConfig(isl=200, osl=8, isl_observations=observations))
    first = [server_count(workload.next_request(RequestKey(1, s)), True) for s in range(10)]
    assert abs(sum(first) / len(first) - 200) <= 1.0, first


def test_borrowed_observations_size_the_first_prompts_and_then_only_their_slope_stays() -> None:
    """A conversation's later turns: sized by the first turns' observations (chat, 7 template tokens) until
    their own first answer, then by their own overhead (here the completions count: no template)."""
    observations = []
    for seq, isl in enumerate((200, 100, 200, 100)):  # (words, the chat count) at two lengths
        spec = SyntheticWorkload(WorkloadConfig(isl=isl, osl=1)).next_request(RequestKey(0, seq))
        assert spec.prompt is not None
        observations.append((len(spec.prompt.split()), server_count(spec, True)))
    config = WorkloadConfig(isl=200, osl=8, isl_observations=tuple(observations))
    later = SyntheticWorkload(config, borrowed=True)
    slope = later.sizer.calibrator.slope
    key = RequestKey(1, 0)
    spec = later.next_request(key)
    assert abs(server_count(spec, True) - 200) <= 2  # the borrowed calibration sizes it
    answer(later, key, spec, server_count(spec, False))  # its own kind costs 7 fewer
    assert (
        later.sizer.calibrator.slope == slope and later.sizer.calibrator.observations == len(observations) + 1
    )
    seen = [server_count(later.next_request(RequestKey(1, s)), False) for s in range(1, 11)]
    assert abs(sum(seen) / len(seen) - 200) <= 1.0, seen  # its own overhead alone, not the mean of both


def test_no_usage_teaches_nothing_and_the_estimate_is_the_target() -> None:
    workload = SyntheticWorkload(WorkloadConfig(isl=50, osl=8))
    key = RequestKey(0, 0)
    spec = workload.next_request(key)
    record = RequestRecord(request_id=1, worker=0, seq=0, level_id=1, sent_ns=0)
    record.input_tokens, record.input_source = 50, "estimate"
    workload.on_response(key, spec, None, record)
    assert workload.sizer.calibrator.observations == 0 and spec.expected_input_tokens == 50


# --- with a local tokenizer (the `tokenizer_file` fixture is in tests/conftest.py) --------------------------


@pytest.mark.parametrize("isl", [1, 17, 64, 200, 1000])
def test_a_tokenizer_cuts_the_prompt_to_the_exact_length(tokenizer_file: str, isl: int) -> None:
    from tui.engine.workload.local_tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer_file)
    workload = SyntheticWorkload(WorkloadConfig(isl=isl, osl=8, tokenizer=tokenizer_file))
    for seq in range(5):
        spec = workload.next_request(RequestKey(0, seq))
        assert spec.prompt is not None and tok.count(spec.prompt) == isl


def test_a_tokenizer_learns_the_template_overhead_from_usage(tokenizer_file: str) -> None:
    from tui.engine.workload.local_tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer_file)
    workload = SyntheticWorkload(WorkloadConfig(isl=100, osl=8, tokenizer=tokenizer_file))
    seen = []
    for seq in range(6):
        key = RequestKey(0, seq)
        spec = workload.next_request(key)
        assert spec.prompt is not None
        seen.append(tok.count(spec.prompt) + 7)  # a server whose chat template adds 7 tokens
        answer(workload, key, spec, seen[-1])
    assert seen[0] == 107 and seen[1:] == [100] * 5


def test_a_missing_tokenizer_is_one_line(tmp_path: object) -> None:
    from tui.engine.workload.local_tokenizer import TokenizerError, load_tokenizer

    pytest.importorskip("tokenizers")
    with pytest.raises(TokenizerError, match="no such tokenizer file"):
        load_tokenizer("/nonexistent/tokenizer.json")
