"""A tokentop command on a real pseudo-terminal, for the tests that drive the whole app as a person would."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping

_AS_CONTROLLING = (
    "import os, sys; os.close(os.open(os.ttyname(0), os.O_RDWR)); "
    "os.execv(sys.executable, [sys.executable, '-m', 'tui', *sys.argv[1:]])"
)
"""Run ``python -m tui`` with the pty as its controlling terminal, as a shell's child has it: a session
leader that opens a terminal acquires it, so closing the pty's master sends the kernel's SIGHUP."""


class PtyApp:
    """``python -m tui ARGS`` with its terminal on a pty: its output drained by a thread (the app blocks if
    nobody reads its terminal) into `screen`; killed on exit if it is still running.

        with PtyApp(["--url", url], env) as app:
            app.write(b"q")
            status = app.wait(20)
    """

    def __init__(self, args: list[str], env: Mapping[str, str]) -> None:
        self.args = args
        self.env = dict(env)
        self.screen = bytearray()
        self._master = -1
        self._hang_up = threading.Event()
        self._reader: threading.Thread | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PtyApp:
        self._master, slave = os.openpty()
        cmd = [sys.executable, "-c", _AS_CONTROLLING, *self.args]
        self.proc = subprocess.Popen(
            cmd, stdin=slave, stdout=slave, stderr=slave, env=self.env, start_new_session=True
        )
        os.close(slave)
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        return self

    def _drain(self) -> None:
        """Read the terminal until it ends; close the master here when `hang_up` asks (a close from another
        thread would not take effect while this one is blocked reading it)."""
        while not self._hang_up.is_set():
            ready, _, _ = select.select([self._master], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self._master, 65536)
            except OSError:
                return
            if not data:
                return
            self.screen.extend(data)
        os.close(self._master)
        self._master = -1

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def write(self, data: bytes) -> None:
        """Type ``data`` on the terminal."""
        os.write(self._master, data)

    def hang_up(self) -> None:
        """Close the terminal, as a closed window, an ssh drop or ``tmux kill-session`` does."""
        self._hang_up.set()
        assert self._reader is not None
        self._reader.join(5)
        assert self._master == -1, "the pty's master is still open"

    def send_signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout_s: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout_s)

    def text(self) -> str:
        return bytes(self.screen).decode(errors="replace")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._hang_up.set()
        if self._reader is not None:
            self._reader.join(5)
        if self._master != -1:
            os.close(self._master)
            self._master = -1
