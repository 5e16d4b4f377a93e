"""The workload protocol's pure parts: specs, keys, the synthetic source, how a spec becomes a body, and the
import direction that keeps workloads out of the face's code."""

from __future__ import annotations

import orjson
import pytest

from tui.engine.config import TargetConfig, WorkloadConfig
from tui.engine.stream.openai import build_body
from tui.engine.workload import (
    Message,
    RequestKey,
    RequestSpec,
    SyntheticWorkload,
    Workload,
    build_workload,
)

CHAT = TargetConfig(base_url="http://x/v1")
COMPLETIONS = TargetConfig(base_url="http://x/v1", endpoint="completions")


def test_spec_has_exactly_one_of_prompt_and_messages() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        RequestSpec(max_tokens=1)
    with pytest.raises(ValueError, match="exactly one"):
        RequestSpec(max_tokens=1, prompt="a", messages=(Message("user", "a"),))
    assert RequestSpec(max_tokens=1, prompt="").prompt == ""


def test_user_key_names_the_user_across_workers() -> None:
    assert RequestKey(2, 9, 3).user_key == (2, 3)
    assert RequestKey(2, 9).user_key is None


def test_messages_go_to_chat_as_given() -> None:
    spec = RequestSpec(
        max_tokens=3,
        messages=(Message("system", "be brief"), Message("user", "hi"), Message("assistant", "yo")),
    )
    body = orjson.loads(build_body(CHAT, "m", spec))
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
    ]
    assert "ignore_eos" not in body and body["max_tokens"] == 3


def test_messages_need_the_chat_endpoint() -> None:
    spec = RequestSpec(max_tokens=3, messages=(Message("user", "hi"),))
    with pytest.raises(ValueError, match="chat endpoint"):
        build_body(COMPLETIONS, "m", spec)


def test_per_request_fields_come_after_ours_and_extra_body_wins() -> None:
    target = TargetConfig(base_url="http://x/v1", extra_body=(("temperature", 1.0),))
    spec = RequestSpec(
        max_tokens=4, prompt="p", fixed_osl=True, extra_fields=(("temperature", 0.2), ("min_tokens", 2))
    )
    body = orjson.loads(build_body(target, "m", spec))
    assert body["temperature"] == 1.0  # --extra-body is the user's last word
    assert body["min_tokens"] == 2  # the workload's field over tokentop's own
    assert body["ignore_eos"] is True
    assert list(body)[-2:] == ["min_tokens", "temperature"]


def test_fixed_osl_fields_dropped_when_the_server_rejects_them() -> None:
    spec = RequestSpec(max_tokens=4, prompt="p", fixed_osl=True)
    body = orjson.loads(build_body(COMPLETIONS, "m", spec, fixed_osl_fields=False))
    assert body == {"model": "m", "prompt": "p", "max_tokens": 4, "stream": True,
                    "stream_options": {"include_usage": True}}  # fmt: skip


def test_synthetic_workload_is_deterministic_and_estimates_isl() -> None:
    config = WorkloadConfig(isl=20, osl=7, fixed_osl=False, seed=4)
    workload: Workload = build_workload(config)
    assert isinstance(workload, SyntheticWorkload) and not workload.wants_replies
    a = workload.next_request(RequestKey(1, 5))
    assert a == SyntheticWorkload(config).next_request(RequestKey(1, 5, user=0))  # the user does not matter
    assert a.prompt is not None and len(a.prompt.split()) == 20
    assert (a.max_tokens, a.fixed_osl, a.expected_input_tokens, a.extra_fields) == (7, False, 20, ())
    others = {workload.next_request(RequestKey(w, s)).prompt for w, s in [(1, 6), (0, 5), (2, 5)]}
    assert a.prompt not in others and len(others) == 3
