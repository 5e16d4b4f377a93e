"""A tokentop command on a real pseudo-terminal, for the tests that drive the whole app as a person would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping


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
        self._reader: threading.Thread | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PtyApp:
        self._master, slave = os.openpty()
        cmd = [sys.executable, "-m", "tui", *self.args]
        self.proc = subprocess.Popen(
            cmd, stdin=slave, stdout=slave, stderr=slave, env=self.env, start_new_session=True
        )
        os.close(slave)
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        return self

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError:
                return
            if not data:
                return
            self.screen.extend(data)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def write(self, data: bytes) -> None:
        """Type ``data`` on the terminal."""
        os.write(self._master, data)

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
        os.close(self._master)
        if self._reader is not None:
            self._reader.join(5)
