"""The API key given as ``--api-key K`` is overwritten in tokentop's own command line while it runs, and no
child (the demo simulator, the engine workers, multiprocessing's tracker) has it in its command line or
environment; ``--api-key-file`` sends the file's key."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.test_engine_handle import ScriptedServerThread
from tests.support.engine_helpers import bench
from tests.support.scripted_server import Request, Responder, normal_stream
from tui import cli
from tui.cli import target as cli_target

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]
KEY = "sk-hidden-" + "7f3a9c1e" * 6


async def _slow_chat(req: Request, resp: Responder) -> None:
    """/v1/models, and chat streams of 8 words 40 ms apart (a request lasts about half a second)."""
    await _chat(req, resp, gap_s=0.04)


async def _chat(req: Request, resp: Responder, gap_s: float = 0.0) -> None:
    if req.method == "GET":
        await resp.json(200, json.dumps({"object": "list", "data": [{"id": "m"}]}).encode())
        return
    if not json.loads(req.body).get("stream"):  # the ISL probe
        await resp.json(200, b'{"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 1}}')
        return
    await resp.head(200)
    for event in normal_stream(["w"] * 8):
        await resp.send(event)
        await asyncio.sleep(gap_s)
    await resp.end()


def _env() -> dict[str, str]:
    return dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL="")


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # ended meanwhile
        ppid = int(text[text.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _read(pid: int, name: str) -> bytes:
    try:
        return (Path("/proc") / str(pid) / name).read_bytes()
    except OSError:
        return b""


def _watch_while_running(
    args: list[str], ready: Callable[[list[bytes]], bool], deadline_s: float = 30.0
) -> tuple[subprocess.Popen[str], dict[int, tuple[bytes, bytes]]]:
    """Start bench, wait (bounded) until ``ready(children's cmdlines)``, then read every process's cmdline
    and environment once more, the run still going."""
    proc = subprocess.Popen([sys.executable, "-m", "tui", "bench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())  # fmt: skip
    seen: dict[int, tuple[bytes, bytes]] = {}
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and proc.poll() is None:
        kids = _descendants(proc.pid)
        if ready([_read(k, "cmdline") for k in kids]):
            for pid in [proc.pid, *kids]:
                seen[pid] = (_read(pid, "cmdline"), _read(pid, "environ"))
            break
        time.sleep(0.02)
    return proc, seen


def test_the_key_is_in_no_process_list_entry_and_is_sent(tmp_path: Path) -> None:
    out, log = tmp_path / "results.json", tmp_path / "requests.jsonl"
    with ScriptedServerThread(_slow_chat) as server:
        args = ["--url", server.url, "--api-key", KEY, "--concurrency", "2", "--requests", "6", "--isl", "16",
                "--osl", "8", "--output", str(out), "--requests-log", str(log)]  # fmt: skip
        workers = lambda cmdlines: any(b"spawn_main" in c for c in cmdlines)  # noqa: E731
        proc, seen = _watch_while_running(args, workers)
        stdout, stderr = proc.communicate(timeout=60)
        sent = server.requests
    assert proc.returncode == 0, stderr
    assert len(seen) >= 3, seen  # tokentop, a worker, multiprocessing's resource tracker
    assert b"--api-key\0" + b"*" * len(KEY) + b"\0" in seen[proc.pid][0]
    for pid, (cmdline, environ) in seen.items():
        assert KEY.encode() not in cmdline, pid
        assert KEY.encode() not in environ, pid
    assert "warning" not in stderr and KEY not in stdout + stderr
    assert {q.headers.get("authorization") for q in sent} == {f"Bearer {KEY}"}
    assert KEY not in out.read_text() + log.read_text()


def test_nor_in_the_demo_simulators(tmp_path: Path) -> None:
    args = ["--api-key", KEY, "--concurrency", "1", "--requests", "5", "--osl", "32", "--isl", "16"]
    both = lambda cmdlines: (any(b"tui.sim" in c for c in cmdlines)  # noqa: E731
                             and any(b"spawn_main" in c for c in cmdlines))  # fmt: skip
    proc, seen = _watch_while_running(args, both)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert any(b"tui.sim" in c for c, _ in seen.values()), seen
    for pid, (cmdline, environ) in seen.items():
        assert KEY.encode() not in cmdline + environ, pid


def test_a_key_file_is_read_stripped_and_sent(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(f"  {KEY}\n")
    with ScriptedServerThread(_chat) as server:
        r = bench("--url", server.url, "--api-key-file", str(key_file), "--concurrency", "1", "--requests",
                  "3", "--isl", "16", "--osl", "4", "--no-isl-probe")  # fmt: skip
        sent = server.requests
    assert r.returncode == 0, r.stderr
    assert sent and {q.headers.get("authorization") for q in sent} == {f"Bearer {KEY}"}
    assert KEY not in r.stdout + r.stderr


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read it: no such file or directory"),
        ("", "the file is empty"),
        ("\n  \n", "the file is empty"),
        ("one\ntwo\n", "holds more than one line; want the key alone"),
    ],
)
def test_a_bad_key_file_is_one_line_exit_2(tmp_path: Path, content: str | None, expected: str) -> None:
    key_file = tmp_path / "key"
    if content is not None:
        key_file.write_text(content)
    r = bench("--url", "http://127.0.0.1:9", "--api-key-file", str(key_file), timeout_s=20)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"tokentop: error: --api-key-file {key_file}: {expected}"]


def test_a_directory_as_key_file_is_one_line_exit_2(tmp_path: Path) -> None:
    r = bench("--url", "http://127.0.0.1:9", "--api-key-file", str(tmp_path), timeout_s=20)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"tokentop: error: --api-key-file {tmp_path}: cannot read it: is a directory"
    ]


def test_a_key_that_cannot_be_hidden_gets_one_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli_target, "hide_in_argv", lambda secret: False)
    assert cli.main(["bench", "--api-key", KEY, "--url", "http://127.0.0.1:abc"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == (
        "tokentop: warning: --api-key is visible to other users in the process list; "
        "give it by $OPENAI_API_KEY or --api-key-file"
    )
    assert len(lines) == 2 and lines[1].startswith("tokentop: error: URL port") and KEY not in lines[1]
