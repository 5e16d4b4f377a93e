"""Fixtures shared by the unit and engine tests."""

from __future__ import annotations

import fcntl
import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# As `tui.cli.dispatch.main` sets it for tokentop's own processes: the engines the tests start in this process
# spawn workers that would otherwise each start a BLAS thread per core as they import numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# The Pilot tests build and drop whole apps (thousands of widgets and their cycles) in these processes: at
# the default thresholds a full collection ran ~50 times over tests/app (12.9 s of its 69.7 s of CPU), at
# (700, 10, 100) 14 times (6.3 s). Tokens are stamped in worker subprocesses, which keep the defaults.
gc.set_threshold(700, 10, 100)


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """A folder ``make`` fills once per test run, however many xdist processes ask for it: an expensive
    fixture (bench runs to read back) costs its time once, not once per process that draws one of its tests.
    The first process to take the lock makes it; the others wait for it, then read what it left."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / f"once-{name}"
    with _locked(root / f"once-{name}.lock"):
        if not (folder / ".made").exists():
            folder.mkdir(exist_ok=True)
            make(folder)
            (folder / ".made").touch()
    return folder


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


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


@pytest.fixture(autouse=True)
def _sessions_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run records a session under the state folder: in tests (and the faces they spawn, which
    inherit the environment) that is a temporary one, never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.getbasetemp() / "state"))
