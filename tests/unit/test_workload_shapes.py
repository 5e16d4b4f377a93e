"""Shaped synthetic workloads, pure: length distributions and scenarios (reproducible, matching their
parameters), the flag syntax, the shared prefix, and prompts unique from their first words otherwise."""

from __future__ import annotations

import argparse
import random
import statistics
from collections import Counter
from pathlib import Path

import pytest

from tui.cli import build_parser
from tui.cli.workload import workload_from_args
from tui.configs import UsageError
from tui.engine.config import LengthDist, Scenario, WorkloadConfig
from tui.engine.records import RequestRecord
from tui.engine.workload import (
    Conversations,
    RequestKey,
    ShapedWorkload,
    SharedPrefix,
    SyntheticWorkload,
    build_workload,
)
from tui.engine.workload.lengths import ScenarioPicker, draw_length
from tui.engine.workload.text import WordText, shared_prefix_text

N = 4000


def _ns(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["bench", *args])


def _prompt(w: object, worker: int, seq: int, user: int | None = None) -> str:
    spec = w.next_request(RequestKey(worker, seq, user))  # type: ignore[attr-defined]
    assert spec.prompt is not None
    return str(spec.prompt)


def test_normal_draws_match_mean_and_stddev_and_stay_in_range() -> None:
    dist = LengthDist("normal", 64, 2048, mean=512, stddev=128)
    rng = random.Random(1)
    draws = [draw_length(dist, rng) for _ in range(N)]
    assert abs(statistics.fmean(draws) - 512) < 8  # 4 standard errors (128 / sqrt(4000) = 2)
    assert abs(statistics.stdev(draws) - 128) < 8
    assert min(draws) >= 64 and max(draws) <= 2048


def test_a_narrow_normal_is_truncated_to_its_range() -> None:
    dist = LengthDist("normal", 500, 520, mean=512, stddev=128)
    draws = [draw_length(dist, random.Random(i)) for i in range(500)]
    assert min(draws) >= 500 and max(draws) <= 520


def test_uniform_draws_cover_the_inclusive_range_evenly() -> None:
    dist = LengthDist("uniform", 100, 109)
    rng = random.Random(2)
    counts = Counter(draw_length(dist, rng) for _ in range(N))
    assert sorted(counts) == list(range(100, 110))
    assert all(abs(c - N / 10) < 4 * (N / 10) ** 0.5 for c in counts.values())


def test_scenarios_are_picked_by_weight() -> None:
    picker = ScenarioPicker((Scenario(512, 128, 0.7), Scenario(2048, 256, 0.3)))
    rng = random.Random(3)
    share = sum(picker.pick(rng).isl == 512 for _ in range(N)) / N
    assert abs(share - 0.7) < 0.03


def test_the_same_seed_asks_for_the_same_lengths_and_text_per_worker_and_request() -> None:
    config = WorkloadConfig(
        seed=7, isl_dist=LengthDist("uniform", 10, 200), osl_dist=LengthDist("uniform", 1, 50)
    )
    a, b = ShapedWorkload(config), ShapedWorkload(config)
    keys = [RequestKey(w, s) for w in range(2) for s in range(50)]
    specs_a = [a.next_request(k) for k in keys]
    assert specs_a == [b.next_request(k) for k in keys]
    other = ShapedWorkload(WorkloadConfig(seed=8, isl_dist=config.isl_dist, osl_dist=config.osl_dist))
    assert [s.max_tokens for s in specs_a] != [other.next_request(k).max_tokens for k in keys]
    # the prompt holds the drawn number of words, which is also the estimate recorded without usage
    for spec in specs_a:
        assert spec.prompt is not None and len(spec.prompt.split()) == spec.expected_input_tokens
        assert 10 <= len(spec.prompt.split()) <= 200 and 1 <= spec.max_tokens <= 50


def test_scenario_requests_carry_the_picked_pair() -> None:
    config = WorkloadConfig(scenarios=(Scenario(30, 5, 1.0), Scenario(90, 9, 1.0)))
    pairs = set()
    for seq in range(200):
        spec = ShapedWorkload(config).next_request(RequestKey(0, seq))
        assert spec.prompt is not None
        pairs.add((len(spec.prompt.split()), spec.max_tokens))
    assert pairs == {(30, 5), (90, 9)}


def test_word_text_slices_by_word() -> None:
    text = WordText("s", 50)
    assert text.words == 50
    assert text.first(0) == ""
    assert len(text.first(7).split()) == 7
    assert text.first(99) == text.text


def test_synthetic_prompts_are_unique_from_their_first_words() -> None:
    """Without a shared prefix no two prompts share their start, so a prefix cache cannot serve them."""
    for w in (
        SyntheticWorkload(WorkloadConfig(isl=64)),
        ShapedWorkload(WorkloadConfig(isl_dist=LengthDist("uniform", 8, 64))),
    ):
        heads = [tuple(_prompt(w, worker, seq).split()[:4]) for worker in range(3) for seq in range(400)]
        assert len(set(heads)) == len(heads)


def test_the_shared_prefix_is_shared_and_the_rest_stays_unique() -> None:
    config = WorkloadConfig(isl=40, shared_prefix=32, seed=5)
    w = build_workload(config)
    assert isinstance(w, SharedPrefix)
    prefix = shared_prefix_text(5, 32)
    assert len(prefix.split()) == 32
    prompts = [_prompt(w, worker, seq) for worker in range(2) for seq in range(100)]
    assert all(p.startswith(prefix) for p in prompts)
    rests = [tuple(p[len(prefix) :].split()[:4]) for p in prompts]
    assert len(set(rests)) == len(rests)
    spec = w.next_request(RequestKey(0, 0))
    assert spec.expected_input_tokens == 72 and spec.prompt is not None and len(spec.prompt.split()) == 72


def test_build_workload_keeps_todays_synthetic_when_nothing_else_is_asked() -> None:
    assert type(build_workload(WorkloadConfig())) is SyntheticWorkload
    assert type(build_workload(WorkloadConfig(isl_dist=LengthDist("fixed", 5, 5)))) is ShapedWorkload
    assert type(build_workload(WorkloadConfig(turns=3))) is Conversations


# --- flags ---------------------------------------------------------------------------------------


def test_flags_become_the_workload_config() -> None:
    cfg = workload_from_args(_ns("--isl-dist", "normal:512,128,64,2048", "--osl-dist", "uniform:100,900"))
    assert cfg.isl_dist == LengthDist("normal", 64, 2048, 512, 128)
    assert cfg.osl_dist == LengthDist("uniform", 100, 900, 500.0)
    cfg = workload_from_args(_ns("--scenarios", "512x128:0.7,2048x256:0.3", "--shared-prefix", "64"))
    assert cfg.scenarios == (Scenario(512, 128, 0.7), Scenario(2048, 256, 0.3)) and cfg.shared_prefix == 64
    assert workload_from_args(_ns("--isl-dist", "300")).isl_dist == LengthDist("fixed", 300, 300, 300.0)
    assert workload_from_args(_ns("--isl-dist", "normal:100,10")).isl_dist == LengthDist(
        "normal", 1, 141, 100, 10
    )
    assert workload_from_args(_ns("--turns", "4", "--concurrency", "2")).turns == 4
    plain = workload_from_args(_ns())
    assert plain == WorkloadConfig(prompt_salt=plain.prompt_salt)


def test_each_run_gets_its_own_prompt_salt_and_repeat_prompts_takes_an_earlier_one(tmp_path: Path) -> None:
    salts = {workload_from_args(_ns()).prompt_salt for _ in range(5)}
    assert len(salts) == 5 and all(len(s) == 8 for s in salts)
    assert workload_from_args(_ns("--repeat-prompts", "a1b2c3d4")).prompt_salt == "a1b2c3d4"
    earlier = tmp_path / "earlier.json"
    earlier.write_text('{"config": {"seed": 3, "prompt_salt": "0badf00d"}}')
    assert workload_from_args(_ns("--repeat-prompts", str(earlier), "--seed", "3")).prompt_salt == "0badf00d"
    with pytest.raises(UsageError, match="ran with --seed 3: add --seed 3"):
        workload_from_args(_ns("--repeat-prompts", str(earlier)))
    unsalted = tmp_path / "unsalted.json"
    unsalted.write_text('{"config": {"seed": 0}}')  # a run that sent no salt: its prompts, unsalted
    assert workload_from_args(_ns("--repeat-prompts", str(unsalted))).prompt_salt == ""
    with pytest.raises(UsageError, match="cannot read"):
        workload_from_args(_ns("--repeat-prompts", str(tmp_path / "missing.json")))
    with pytest.raises(UsageError, match="not a results file nor a salt"):
        workload_from_args(_ns("--repeat-prompts", "no spaces"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--isl-dist", "gamma:1,2"], "want N, normal"),
        (["--isl-dist", "normal:512"], "normal wants MEAN,STDDEV"),
        (["--isl-dist", "normal:a,b"], "must be numbers"),
        (["--isl-dist", "normal:5000,1,64,2048"], "outside MIN..MAX"),
        (["--osl-dist", "uniform:900,100"], "MIN 900 is above MAX 100"),
        (["--osl-dist", "uniform:0,100"], "outside 1..1000000"),
        (["--isl-dist", "12.5"], "not a whole number"),
        (["--scenarios", "512:0.5"], "want ISLxOSL"),
        (["--scenarios", "512x128:-1"], "weight must be positive"),
        (["--scenarios", "512x128:abc"], "weight is not a number"),
        (["--scenarios", "512x128", "--isl-dist", "5"], "drop --isl-dist"),
        (["--turns", "2", "--endpoint", "completions"], "chat endpoint"),
        (["--turns", "2", "--rate", "3"], "closed-loop"),
        (["--dataset-order", "shuffle"], "need --dataset"),
    ],
)
def test_bad_shape_flags_are_one_usage_error(args: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        workload_from_args(_ns(*args))
    assert "\n" not in str(info.value)


# --- conversations, without a server ------------------------------------------------------------


def _answer(w: Conversations, key: RequestKey, reply: str = "fine thanks", status: str = "ok") -> list[str]:
    """Ask ``w`` for ``key``'s request and answer it; the roles sent."""
    spec = w.next_request(key)
    assert spec.messages is not None and spec.prompt is None
    record = RequestRecord(request_id=1, worker=key.worker, seq=key.seq, level_id=1, sent_ns=0)
    record.status = status  # type: ignore[assignment]
    record.input_tokens = None
    w.on_response(key, spec, reply, record)
    return [m.role for m in spec.messages]


def test_a_conversation_grows_for_k_turns_then_restarts_and_a_failure_ends_it() -> None:
    w = build_workload(WorkloadConfig(isl=6, turns=3, shared_prefix=5, seed=2))
    assert isinstance(w, Conversations) and w.wants_replies
    roles = [_answer(w, RequestKey(0, seq, user=0)) for seq in range(4)]
    assert roles == [["user"], ["user", "assistant", "user"], ["user", "assistant"] * 2 + ["user"], ["user"]]
    _answer(w, RequestKey(0, 4, user=0), status="error")
    assert _answer(w, RequestKey(0, 5, user=0)) == ["user"]  # the failed turn ended that conversation
    # the shared prefix leads each conversation's first message only
    prefix = shared_prefix_text(2, 5)
    first = w.next_request(RequestKey(0, 6, user=1))
    assert first.messages is not None and first.messages[0].content.startswith(prefix)
    _answer(w, RequestKey(0, 6, user=1))
    second = w.next_request(RequestKey(0, 7, user=1))
    assert second.messages is not None and not second.messages[-1].content.startswith(prefix)
    assert second.expected_input_tokens == 5 + 6 + 2 + 6  # prefix, question, reply, question
    # an open-loop arrival has no user: every request is a one-turn conversation
    assert _answer(w, RequestKey(0, 8)) == ["user"] and _answer(w, RequestKey(0, 9)) == ["user"]
