"""Start the simulator in a subprocess, for the demo and the tests.

    with SimServer("small-gpu", time_scale=10) as sim:
        ...  # talk to sim.url ("http://127.0.0.1:PORT/v1")

The child is `python -m tui.sim --port 0 ...` on 127.0.0.1 (the simulator's own entry point, which knows
every flag in `tui.sim.flags`). It prints one line when listening
(`tokentop sim: serving profile NAME on URL`); `start` reads the URL from it and then waits for `/v1/models`
to answer. Stdlib only (no httpx): this module is imported by faces and tests alike.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO
from urllib.parse import urlsplit

from tui.sim.faults import fault_args

_READY_PREFIX = "tokentop sim: serving profile "


class SimServer:
    """Runs the simulator in a subprocess (`python -m tui.sim --port 0 ...`) on 127.0.0.1; context manager.

    `state_log`: where the child records its scheduler state changes (`tui.sim.truth.StateLog`);
    `metrics=False` makes its `/metrics` answer 404."""

    def __init__(
        self,
        profile: str = "small-gpu",
        *,
        time_scale: float = 1.0,
        seed: int = 0,
        tokens_per_chunk: int = 1,
        reasoning_tokens: int = 0,
        faults: dict[str, float] | None = None,
        truth_log: Path | None = None,
        keep_alive_s: float | None = None,
        state_log: Path | None = None,
        metrics: bool = True,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.profile = profile
        self.url = ""
        """`http://127.0.0.1:PORT/v1`, set by start()."""
        args = [
            "--host", "127.0.0.1", "--port", "0", "--profile", profile,
            "--time-scale", repr(float(time_scale)), "--seed", str(seed),
            "--tokens-per-chunk", str(tokens_per_chunk), "--reasoning-tokens", str(reasoning_tokens),
        ]  # fmt: skip
        args += fault_args(faults or {})
        if truth_log is not None:
            args += ["--truth-log", str(truth_log)]
        if keep_alive_s is not None:  # None: the sim's default (5 s)
            args += ["--keep-alive", repr(float(keep_alive_s))]
        if state_log is not None:
            args += ["--state-log", str(state_log)]
        if not metrics:
            args.append("--no-metrics")
        args.append("--exit-with-parent")  # the child goes when this process goes, even by SIGKILL
        self.args: list[str] = [sys.executable, "-m", "tui.sim", *args, *extra_args]
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def port(self) -> int:
        """The listening port (after start())."""
        return urlsplit(self.url).port or 0

    def start(self, timeout_s: float = 10.0) -> SimServer:
        """Start the child, wait until it prints its URL and answers /v1/models; RuntimeError on failure."""
        if self.process is not None:
            return self
        deadline = time.monotonic() + timeout_s
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # A session of its own: a signal to this process's group (Ctrl-C, `timeout`) reaches us, and we
        # stop the simulator after the streams in flight are recorded, rather than it dying under them.
        self.process = subprocess.Popen(
            self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env,
            start_new_session=True,
        )  # fmt: skip
        try:
            self.url = self._read_url(deadline)
            self._wait_models(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after 5 s) and wait for it. Idempotent."""
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- internals --

    def _failure(self, what: str) -> RuntimeError:
        detail = ""
        process = self.process
        if process is not None and process.poll() is not None and self._stderr is not None:
            self._stderr.seek(0)
            detail = self._stderr.read().decode(errors="replace").strip()
            detail = f" (exit {process.returncode}: {detail.splitlines()[-1] if detail else 'no message'})"
        return RuntimeError(f"tokentop sim {what}{detail}; command: {' '.join(self.args[1:])}")

    def _read_url(self, deadline: float) -> str:
        """Read the child's stdout until its ready line (without blocking past the deadline)."""
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._failure("did not print its URL in time")
                if not selector.select(remaining):
                    continue
                data = os.read(stdout.fileno(), 4096)
                if not data:
                    self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                    raise self._failure("exited before serving")
                pending += data
                while b"\n" in pending:
                    line, _, pending = pending.partition(b"\n")
                    text = line.decode(errors="replace").strip()
                    if text.startswith(_READY_PREFIX):
                        return text.rsplit(" on ", 1)[1]

    def _wait_models(self, deadline: float) -> None:
        """Poll GET /v1/models until it answers 200 (it normally does at once)."""
        parts = urlsplit(self.url)
        while True:
            conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=1.0)
            try:
                conn.request("GET", parts.path + "/models")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            finally:
                with contextlib.suppress(Exception):
                    conn.close()
            if time.monotonic() >= deadline:
                raise self._failure("did not answer /v1/models in time")
            time.sleep(0.02)  # bounded by the deadline above; a poll, not a wait for something to happen
