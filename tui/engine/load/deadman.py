"""The worker's dead-man switch when its controller is on another machine: a relay thread between the node
agent's command pipe and the worker's own, which stops the worker when the agent has not been heard from
for ``after_s`` (no command, no heartbeat).

Why in the worker's process and not the agent's: a frozen agent (a hung or cut-off machine, SIGSTOP) runs
no timer, while its children keep loading the server unseen. The agent sends a heartbeat each time the face
collects from it, so a face that stops calling and an agent that stops running both starve the switch.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

from tui.engine.wire import Stop

HEARTBEAT = b"\0"
"""What the agent sends down the command pipe to say "the face is still there" (never forwarded)."""
DEAD_AFTER_S = 5.0


class DeadManSwitch:
    """Expires ``after_s`` after the last `feed` (or its creation), on ``clock``."""

    def __init__(self, after_s: float = DEAD_AFTER_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.after_s = after_s
        self._clock = clock
        self._fed = clock()

    def feed(self) -> None:
        self._fed = self._clock()

    def remaining_s(self) -> float:
        """Seconds until it expires (0 once expired)."""
        return max(0.0, self._fed + self.after_s - self._clock())

    @property
    def expired(self) -> bool:
        return self.remaining_s() <= 0.0


def relay_commands(source: Connection, sink: Connection, switch: DeadManSwitch) -> str:
    """Forward commands from ``source`` (the agent) to ``sink`` (the worker) until the agent's pipe closes or
    the switch expires; then tell the worker to stop at once and close ``sink``. Returns why it ended:
    "closed" or "silent"."""
    why = "closed"
    try:
        while True:
            if not source.poll(switch.remaining_s()):
                if switch.expired:
                    why = "silent"
                    break
                continue
            raw = source.recv_bytes()
            switch.feed()
            if raw != HEARTBEAT:
                sink.send_bytes(raw)
    except (EOFError, OSError):
        pass
    with contextlib.suppress(OSError):
        sink.send(Stop(False, 0.0))
    with contextlib.suppress(OSError):
        sink.close()
    return why


def start_relay(source: Connection, sink: Connection, after_s: float) -> threading.Thread:
    """`relay_commands` on a daemon thread (it blocks in poll almost always: a wake per heartbeat)."""
    thread = threading.Thread(
        target=relay_commands, args=(source, sink, DeadManSwitch(after_s)), name="tokentop-relay", daemon=True
    )
    thread.start()
    return thread
