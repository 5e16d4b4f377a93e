"""A session that cannot be written whole, in `tokentop bench`: the first failed write is one line at once
(what was lost and from when), the run goes on, the exit line says "session incomplete (...)" and the
exit status is 1; `tokentop sessions` lists a cut session as cut and an empty one as empty. On a tmpfs of a
few KB where the test may mount one (root), and everywhere on a file size limit (RLIMIT_FSIZE: the same
failed write, EFBIG instead of ENOSPC)."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine_helpers import tokentop

pytestmark = pytest.mark.timeout(150)
SUFFIX = ".tokentop-session.gz"


def _bench(session: Path, *, fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    """A short run on the built-in simulator recording to ``session`` (with no output but the session, so
    a file size limit falls on it alone)."""

    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    cmd = [sys.executable, "-m", "tui", "bench", "--sim-profile", "tiny-cpu", "--concurrency", "2",
           "--duration", "5", "--no-isl-probe", "--record", str(session)]  # fmt: skip
    env = dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL="", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=90, env=env, check=False, preexec_fn=limit
    )


def _sessions(folder: Path) -> str:
    done = tokentop("sessions", "--dir", str(folder))
    assert done.returncode == 0, done.stderr
    return done.stdout


def _said_at_once_and_at_the_end(run: subprocess.CompletedProcess[str], path: Path, why: str) -> None:
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    said = [i for i, line in enumerate(lines) if line.startswith(f"session: cannot write {path} ({why} at ")]
    assert said, run.stderr
    assert lines[-1].startswith(f"session incomplete ({why} at ") and lines[-1].endswith(str(path))
    assert "session recorded" not in run.stderr
    assert "c=2" in run.stdout  # the run went on and measured: its table


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 4 KB, where mounting is permitted (root); skipped elsewhere."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(folder)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, check=False)


def test_a_full_disk_cuts_the_first_session_and_empties_the_second_and_each_says_so(tiny_disk: Path) -> None:
    first, second = tiny_disk / f"a{SUFFIX}", tiny_disk / f"b{SUFFIX}"
    run = _bench(first)
    _said_at_once_and_at_the_end(run, first, "disk full")
    run = _bench(second)
    _said_at_once_and_at_the_end(run, second, "disk full")
    assert "nothing of the run was saved" in run.stderr and second.stat().st_size == 0
    listing = _sessions(tiny_disk)
    assert f"(cut short)\n  {first}" in listing, listing
    assert f"{second}: an empty session (0 bytes" in listing, listing
    assert "not a tokentop session" not in listing


def test_a_session_past_the_file_size_limit_is_said_at_once_and_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / f"s{SUFFIX}"
    run = _bench(path, fsize=6000)
    _said_at_once_and_at_the_end(run, path, "file too large")
    lines = run.stderr.splitlines()
    said = next(i for i, line in enumerate(lines) if line.startswith("session: cannot write"))
    assert any(line.startswith("[1/1]") for line in lines[said + 1 :]), run.stderr  # and the run went on
    assert f"(cut short)\n  {path}" in _sessions(tmp_path)
