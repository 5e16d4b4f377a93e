"""Fixtures shared by the unit and engine tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tokenizer_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny BPE tokenizer trained here, offline, on the workload's own words (so long words split)."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    from tui.engine.workload.synthetic import _VOCAB

    tok = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=["[UNK]"])
    tok.train_from_iterator([" ".join(_VOCAB)] * 4, trainer=trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return str(path)


TIMING_MODULES = frozenset({"test_engine_truth.py", "test_saved_window_truth.py"})
"""Modules that compare measured timings with the simulator's truth to the millisecond."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``-n 2 --dist loadgroup`` (.ci/run) the `heavy` tests, which load both cores on purpose, and the
    timing-accuracy ones run in one process, one after another: never two of them side by side, where one
    would starve the other's timing loop. Without xdist the mark is inert."""
    for item in items:
        if item.get_closest_marker("heavy") or item.path.name in TIMING_MODULES:
            item.add_marker(pytest.mark.xdist_group("timing"))
