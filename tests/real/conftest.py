"""The `real` suite: tokentop against real inference servers on this machine, each test skipped (saying why)
when its server is not up. CI installs none of them and deselects the marker (`-m 'not real'`); run it with
``pytest -m real tests/real`` after starting the servers (``tokentop help develop``: the real suite).

- vLLM at ``TOKENTOP_VLLM_URL`` (default http://127.0.0.1:8092: ``../shared/realserver/vllm_start.sh``);
  the prefix-cache tests want it started with ``EXTRA_ARGS="--enable-prefix-caching
  --enable-prompt-tokens-details"`` and the reset ones with ``VLLM_SERVER_DEV_MODE=1``.
- llama.cpp at ``TOKENTOP_LLAMACPP_URL`` (default http://127.0.0.1:8081: ``../shared/realserver/start.sh``).
- Any OpenAI-compatible server at ``TOKENTOP_REAL_URL`` (no default).

Every test here is marked `real` by the hook below, so ``-m 'not real'`` drops the folder without looking
for servers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.real_servers import Server, up

HERE = Path(__file__).parent
VLLM_URL = os.environ.get("TOKENTOP_VLLM_URL", "http://127.0.0.1:8092")
LLAMACPP_URL = os.environ.get("TOKENTOP_LLAMACPP_URL", "http://127.0.0.1:8081")
REAL_URL = os.environ.get("TOKENTOP_REAL_URL")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.real)


@pytest.fixture(scope="session")
def vllm() -> Server:
    return up(VLLM_URL, "vllm:", "start ../shared/realserver/vllm_start.sh or set TOKENTOP_VLLM_URL")


@pytest.fixture(scope="session")
def llamacpp() -> Server:
    return up(LLAMACPP_URL, "llamacpp:", "start ../shared/realserver/start.sh or set TOKENTOP_LLAMACPP_URL")


@pytest.fixture(scope="session")
def any_server() -> Server:
    if not REAL_URL:
        pytest.skip("set TOKENTOP_REAL_URL to run against any OpenAI-compatible server")
    return up(REAL_URL, "", "check TOKENTOP_REAL_URL")
