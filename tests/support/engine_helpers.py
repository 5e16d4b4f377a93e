"""Helpers for the engine tests: a handle against the simulator, bounded waits, the two logs joined."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.support.scripted_server import ScriptedServer
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.handle import EngineHandle
from tui.engine.records import RequestRecord
from tui.engine.snapshot import Snapshot
from tui.engine.stream.client import RequestSession, run_request
from tui.engine.stream.openai import StreamAccumulator

T = TypeVar("T")


def wait_for(
    handle: EngineHandle, pred: Callable[[Snapshot], T], timeout_s: float, what: str = "condition"
) -> tuple[T, Snapshot, float]:
    """Poll snapshots (every 20 ms, like a face's tick) until ``pred`` is truthy; fail after ``timeout_s``.
    Returns (value, snapshot, seconds waited)."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    while True:
        snap = handle.snapshot()
        if snap.fatal:
            raise AssertionError(f"engine fatal while waiting for {what}: {snap.fatal}")
        value = pred(snap)
        if value:
            return value, snap, time.monotonic() - t0
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout_s} s waiting for {what}; last: completed="
                f"{snap.completed} failed={snap.failed} in_flight={snap.in_flight}"
            )
        time.sleep(0.02)


@contextmanager
def running_handle(
    url: str,
    load: LoadTarget,
    tmp_path: Path,
    *,
    workload: WorkloadConfig | None = None,
    workers: int = 1,
    options: EngineOptions | None = None,
    timeout_s: float = 30.0,
    api_key: str | None = None,
) -> Iterator[EngineHandle]:
    target = TargetConfig(base_url=url, timeout_s=timeout_s, api_key=api_key)
    handle = EngineHandle(
        target,
        workload or WorkloadConfig(isl=32, osl=16),
        load,
        workers=workers,
        requests_log=tmp_path / "requests.jsonl",
        options=options,
    )
    handle.start()
    try:
        assert handle.wait_ready(30.0), "engine did not start"
        yield handle
    finally:
        handle.stop(finish_in_flight=False, timeout_s=5.0)


def read_jsonl(path: Path, *, live: bool = False) -> list[dict[str, Any]]:
    """Every record of a JSONL file. ``live``: the file is still being written, so a last line without its
    newline is a write in progress (a reader can see half of it), not a record yet."""
    text = path.read_text()
    if live:
        text = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def logged_lines(path: Path) -> int:
    """How many whole lines a log still being written holds; 0 while it does not exist. The check of the
    outputs before a run creates the log and removes it again, so it can vanish between two looks."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def joined(requests_log: Path, truth_log: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(client record, server truth) pairs joined on the x-tokentop-request-id the client sent."""
    truth = {t["client_request_id"]: t for t in read_jsonl(truth_log)}
    return [
        (r, truth[r["client_request_id"]])
        for r in read_jsonl(requests_log)
        if r["client_request_id"] in truth
    ]


def bench(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """`tokentop bench ARGS`, with no API key or base URL from the environment (an empty value counts as
    unset); never raises on exit. Run in this process (`tokentop`): a bench process of its own costs
    ~0.6 s of CPU in imports alone, and the suite runs ~200 of them. Tests that need the process itself (a
    signal, the process list, output while it runs) start one with `bench_process_argv`."""
    return tokentop("bench", *args, timeout_s=timeout_s)


def bench_process_argv(*args: str) -> list[str]:
    """The command line of `tokentop bench ARGS` as a process of its own."""
    return [sys.executable, "-m", "tui", "bench", *args]


def tokentop(
    *argv: str, timeout_s: float = 60.0, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """`tokentop ARGV` run by its own `main` in this process, as a process would see it: file descriptors 1
    and 2 (and so the engine workers it spawns) and ``sys.stdout``/``sys.stderr`` go to files read back
    afterwards, neither is a terminal, $OPENAI_API_KEY and $OPENAI_BASE_URL are empty (``env`` sets more;
    None unsets), and argparse's exits are statuses. Fails the test when it took longer than ``timeout_s``
    (a hang is ended by pytest-timeout) or left a thread running."""
    from tui.cli.dispatch import main

    changes: dict[str, str | None] = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", **(env or {})}
    saved_env = {k: os.environ.get(k) for k in changes}
    threads_before = set(threading.enumerate())
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        saved_fds = os.dup(1), os.dup(2)
        saved_streams = sys.stdout, sys.stderr
        t0 = time.monotonic()
        try:
            _set_env(changes)
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115 (closed below, fd kept)
            sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
            try:
                status = main(list(argv))
            except SystemExit as exc:  # argparse's --help and bad flags
                status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if exc.code is not None and not isinstance(exc.code, int):
                    print(exc.code, file=sys.stderr)
        finally:
            elapsed = time.monotonic() - t0
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
                stream.close()
            sys.stdout, sys.stderr = saved_streams
            for fd, saved in zip((1, 2), saved_fds, strict=True):
                os.dup2(saved, fd)
                os.close(saved)
            _set_env(saved_env)
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode(errors="replace"))
    assert elapsed < timeout_s, f"tokentop {' '.join(argv)} took {elapsed:.1f} s, over its {timeout_s} s"
    _assert_no_thread_left(threads_before, list(argv))
    return subprocess.CompletedProcess([sys.executable, "-m", "tui", *argv], status, texts[0], texts[1])


def _set_env(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _assert_no_thread_left(before: set[threading.Thread], argv: list[str], wait_s: float = 5.0) -> None:
    """A face run in a process of its own could leave a daemon thread behind unseen; here it would keep
    running into the next test. Threads still ending are given ``wait_s``."""
    deadline = time.monotonic() + wait_s
    for thread in set(threading.enumerate()) - before:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    assert not left, f"tokentop {' '.join(argv)} left threads running: {left}"


async def run_requests(
    session: RequestSession, client: httpx.AsyncClient, server: ScriptedServer, n: int
) -> tuple[list[RequestRecord], list[StreamAccumulator]]:
    """``n`` requests one after another over ``session``, then the session, its client and the scripted
    server closed whatever happened: each request's record and accumulator."""
    records, accs = [], []
    try:
        for seq in range(n):
            rec = RequestRecord(request_id=seq + 1, worker=0, seq=seq, level_id=1, sent_ns=0)
            acc = StreamAccumulator()
            records.append(await run_request(session, rec, acc))
            accs.append(acc)
    finally:
        await session.aclose()
        await client.aclose()
        await server.close()
    return records, accs
