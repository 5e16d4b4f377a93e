"""Request bodies are byte-identical for the same seed, prompt salt, worker and seq.

The hashes below were recorded from the request-building code before the workload seam existed (prompts made
in `tui.engine.stream.openai`, commit 6103258), with no prompt salt; the synthetic workload must keep every
one of them at ``prompt_salt=""`` (what ``--repeat-prompts`` sends for a results file without a salt), since
a changed body changes what a server caches and what a rerun measures. A salt changes the first words only.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from tui.engine.config import LengthDist, TargetConfig, WorkloadConfig
from tui.engine.stream.openai import build_body
from tui.engine.workload import RequestKey, build_workload

Case = tuple[str, int, int, bool, int, int, int, bool, tuple[tuple[str, object], ...], str]

EXTRA: tuple[tuple[str, object], ...] = (("temperature", 0.0), ("max_tokens", 9), ("top_k", [1, 2]))
"""`--extra-body` fields, one of which overrides a field tokentop sets itself."""

RECORDED: list[Case] = [
    # endpoint, isl, osl, fixed_osl, seed, worker, seq, server takes fixed-OSL fields, extra_body, sha256[:32]
    ("chat", 128, 128, True, 0, 0, 0, True, (), "0f4a36b29faf1844712b1e28d37e54cb"),
    ("chat", 128, 128, True, 0, 0, 1, True, (), "e4b13db698da5b3e4b4605feda52f785"),
    ("chat", 128, 128, True, 0, 3, 7, True, (), "37e653cbefbf574d11c60b97d777dc95"),
    ("chat", 16, 8, True, 0, 0, 0, False, (), "873d96d4355257adb2ffa3911c8d33bd"),
    ("chat", 512, 256, False, 42, 1, 99, True, (), "4eb1de8cf60538e533ef59e11f4acb7a"),
    ("completions", 128, 128, True, 0, 0, 0, True, (), "6c9ac0287e2e8214e08daf5d7649aac9"),
    ("completions", 3, 5, True, 7, 2, 11, True, (), "270e6b27690da7ef8b1a1a376a5e2cbb"),
    ("completions", 0, 1, False, 1, 0, 0, True, (), "b2913ab7b28f3317e1769be41dff1306"),
    ("chat", 32, 16, True, 5, 1, 2, True, EXTRA, "c70cc4402eea4152bc9ba381b353000f"),
]  # fmt: skip

SMALL_CHAT = (
    b'{"model":"m","messages":[{"role":"user","content":"music music history player side field"}],'
    b'"max_tokens":4,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"min_tokens":4}'
)
"""isl 6, osl 4, seed 3, worker 1, seq 2, chat: the whole body, so a failure shows what changed."""
SMALL_COMPLETIONS = (
    b'{"model":"m","prompt":"fact morning parent program side field","max_tokens":4,"stream":true,'
    b'"stream_options":{"include_usage":true}}'
)
"""isl 6, osl 4, seed 3, worker 0, seq 5, completions, server rejected the fixed-OSL fields."""


def body_for(
    endpoint: str,
    workload: WorkloadConfig,
    worker: int,
    seq: int,
    *,
    fixed_osl_fields: bool = True,
    extra_body: tuple[tuple[str, object], ...] = (),
) -> bytes:
    """The body request ``seq`` of ``worker`` sends, built the way the client builds it."""
    target = TargetConfig(base_url="http://x/v1", endpoint=endpoint, extra_body=extra_body)  # type: ignore[arg-type]
    spec = build_workload(workload).next_request(RequestKey(worker, seq))
    return build_body(target, "m", spec, fixed_osl_fields=fixed_osl_fields)


@pytest.mark.parametrize("case", RECORDED, ids=lambda c: f"{c[0]}-isl{c[1]}-w{c[5]}-s{c[6]}")
def test_body_matches_recorded_hash(case: Case) -> None:
    endpoint, isl, osl, fixed, seed, worker, seq, accepted, extra, digest = case
    workload = WorkloadConfig(isl=isl, osl=osl, fixed_osl=fixed, seed=seed, prompt_salt="")
    body = body_for(endpoint, workload, worker, seq, fixed_osl_fields=accepted, extra_body=extra)
    assert hashlib.sha256(body).hexdigest()[:32] == digest


def test_small_bodies_match_recorded_bytes() -> None:
    workload = WorkloadConfig(isl=6, osl=4, seed=3, prompt_salt="")
    assert body_for("chat", workload, 1, 2) == SMALL_CHAT
    assert body_for("completions", workload, 0, 5, fixed_osl_fields=False) == SMALL_COMPLETIONS


def _prompt(workload: WorkloadConfig, worker: int, seq: int) -> str:
    spec = build_workload(workload).next_request(RequestKey(worker, seq))
    assert spec.prompt is not None
    return spec.prompt


@pytest.mark.parametrize(
    "shape",
    [{}, {"isl_dist": LengthDist("uniform", 20, 60, 40.0)}, {"shared_prefix": 12}],
    ids=["synthetic", "shaped", "shared-prefix"],
)
def test_a_prompt_salt_changes_the_first_words_and_nothing_else(shape: dict[str, object]) -> None:
    """Two salts, the same seed: the prompts differ from their first words (no earlier run's cached blocks
    match), and are as long as each other, word for word, as the unsalted ones (lengths follow the seed)."""
    plain = WorkloadConfig(isl=40, seed=4, prompt_salt="", **shape)  # type: ignore[arg-type]
    for seq in range(5):
        texts = [_prompt(replace(plain, prompt_salt=salt), 1, seq) for salt in ("", "a1b2c3d4", "e5f6a7b8")]
        words = [t.split() for t in texts]
        assert len({len(w) for w in words}) == 1
        assert len(set(texts)) == 3
        head = 4 + plain.shared_prefix  # the per-request words, after the (salted) shared prefix
        assert len({tuple(w[:head]) for w in words}) == 3
        assert words[1][head:] == words[0][head:] == words[2][head:]  # the seed's text after the head
        assert _prompt(replace(plain, prompt_salt="a1b2c3d4"), 1, seq) == texts[1]  # a salt repeats exactly
