"""Helpers for the engine tests: a handle against the simulator, bounded waits, the two logs joined."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    """`tokentop bench ARGS` in a subprocess, with no API key or base URL from the environment (an empty
    value counts as unset); never raises on exit."""
    env = dict(os.environ, OPENAI_API_KEY="", OPENAI_BASE_URL="")
    return subprocess.run(
        [sys.executable, "-m", "tui", "bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )


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
