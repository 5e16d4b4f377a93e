"""The simulated OpenAI-compatible server: the wiring of its parts, `serve`, and `tokentop sim`'s entry point.

- `config`: `tokentop sim` flags -> `SimConfig`.
- `http`: HTTP/1.1 over a raw asyncio.Protocol (parsing, response heads, chunked framing).
- `openai_api`: request validation, OpenAI error shapes, chunk templates.
- `generation`: one generation request's wire output, faults and truth record (the hot path).
- `stepper`: the asyncio task stepping `tui.sim.perf_model.Scheduler` on the modelled clock.
- `simulator`: routing, admission and counters, tying the above together.
- `truth`: the ground-truth log and the scheduler state log.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from tui.cpu_slice import request_short_slice
from tui.sim.config import SimConfig, config_from_args
from tui.sim.http import HttpProtocol
from tui.sim.perf_model import PROFILES, decode_tokens_per_s
from tui.sim.simulator import Simulator
from tui.sim.truth import StateLog, TruthLog


class ListenError(Exception):
    """The server could not bind its address."""


async def serve(
    config: SimConfig,
    stop: asyncio.Event,
    *,
    on_ready: Callable[[str], None] | None = None,
    truth_log: TruthLog | None = None,
    state_log: StateLog | None = None,
) -> None:
    """Serve until `stop` is set. `on_ready` gets the base URL (`http://host:port/v1`) once listening."""
    loop = asyncio.get_running_loop()
    sim = Simulator(config, truth_log, state_log)
    keep_alive_s = config.keep_alive_s
    try:
        server = await loop.create_server(
            lambda: HttpProtocol(sim, keep_alive_s), config.host, config.port, backlog=4096
        )
    except OSError as exc:
        for log in (truth_log, state_log):
            if log is not None:
                log.close()
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise ListenError(f"cannot listen on {config.host}:{config.port}: {reason}") from None
    port = server.sockets[0].getsockname()[1]
    host = f"[{config.host}]" if ":" in config.host else config.host
    sim.start()
    if on_ready is not None:
        on_ready(f"http://{host}:{port}/v1")
    try:
        await stop.wait()
    finally:
        server.close()
        await sim.close()


def _run(coro: Coroutine[Any, Any, int]) -> int:
    """Run on uvloop when it is installed (optional), else asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(coro)
    uvloop.install()  # pragma: no cover - Python 3.10 only
    return asyncio.run(coro)  # pragma: no cover


def run(config: SimConfig) -> int:
    """Serve `config` until SIGINT/SIGTERM (exit 0); exit 1 if the address is taken or the log can't open."""
    truth_log: TruthLog | None = None
    state_log: StateLog | None = None
    try:
        if config.truth_log is not None:
            truth_log = TruthLog(config.truth_log)
        if config.state_log is not None:
            state_log = StateLog(config.state_log)
    except OSError as exc:
        if truth_log is not None:
            truth_log.close()
        which = "state" if truth_log is not None or config.truth_log is None else "truth"
        path = config.state_log if which == "state" else config.truth_log
        print(f"tokentop sim: cannot open {which} log {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1

    request_short_slice()  # the referee's stamps wait for no other process's slice (see the module)

    def ready(url: str) -> None:
        print(f"tokentop sim: serving profile {config.profile.name} on {url}", flush=True)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if config.exit_with_parent:
            _stop_when_stdin_closes(loop, stop)
        try:
            await serve(config, stop, on_ready=ready, truth_log=truth_log, state_log=state_log)
        except ListenError as exc:
            print(f"tokentop sim: {exc}", file=sys.stderr)
            return 1
        return 0

    return _run(main())


def _stop_when_stdin_closes(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Set ``stop`` at end of file on standard input: the parent (`SimServer`) holds the other end of the
    pipe, so however it ends, even by SIGKILL, the kernel closes it and the simulator follows."""
    fd = sys.stdin.fileno()

    def on_readable() -> None:
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(fd)
            stop.set()

    loop.add_reader(fd, on_readable)


def list_profiles() -> str:
    """The `--list-profiles` text: one line per profile."""
    width = max(len(name) for name in PROFILES)
    lines = []
    for p in PROFILES.values():
        one = decode_tokens_per_s(p, 1)
        full = decode_tokens_per_s(p, min(p.max_num_seqs, 256))
        lines.append(
            f"{p.name:<{width}}  {p.description}  [model {p.model}; max {p.max_num_seqs} seqs, "
            f"{p.kv_cache_tokens:,} KV tokens; model says {one:,.0f} tok/s at 1 stream, "
            f"{full:,.0f} at {min(p.max_num_seqs, 256)}]"
        )
    return "\n".join(lines)


def run_from_args(ns: argparse.Namespace) -> int:
    """`tokentop sim`: exit 0 on a clean stop, 1 if it cannot listen, 2 on a bad flag (one line on stderr)."""
    if ns.list_profiles:
        print(list_profiles())
        return 0
    try:
        config = config_from_args(ns)
    except ValueError as exc:
        print(f"tokentop: error: {exc}", file=sys.stderr)
        return 2
    return run(config)
