"""``alternate`` in the live app: the steered load held on one side at a time, in turns A B B A A B...

The order turns round each pair, so a drift that grows over the run falls on both sides alike (bench's
`tui.bench.ab.run_turns` does the same per level). The side whose turn ends is paused and rests until
nothing of its own is in flight, so neither ever sees the other's load. Each turn is a level of its side
(a resume opens one), and the verdicts take a side's turns at a load as its repeats.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

from tui.engine.api import Engine
from tui.engine.config import LoadTarget

POLL_S = 0.05
"""How often a turn's end and a resting side's last answers are looked for."""
REST_S = 60.0
"""The longest a side rests waiting for its last answers before the other's turn starts anyway."""


def side_of(turn: int) -> int:
    """The side (0: A, 1: B) of the ``turn``-th turn, counted from 0: A B B A A B B A..."""
    return ((turn + 1) // 2) % 2


class Turns:
    """Holds the steered target and gives it to one side at a time, each for ``block_s`` seconds; the keys'
    targets come in through `set_load` (a new load restarts the turn's clock), the turns go on a thread."""

    def __init__(
        self, sides: tuple[Engine, Engine], block_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.sides, self.block_s, self._clock = sides, block_s, clock
        self.target = sides[0].load
        """The load the keys (or a ramp) set; the side on turn runs it, the other is paused."""
        self._lock = threading.Lock()
        self._turn = 0
        self._on: int | None = 0
        """The side the load is on now; None while one rests before the other's turn."""
        self._since = clock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tokentop-ab-turns", daemon=True)
        sides[1].set_load(replace(sides[1].load, paused=True))  # before it starts: B waits for its turn

    @property
    def on(self) -> str:
        """ "A" or "B": the side the load is on now; "" while one rests or the load is paused."""
        on = self._on
        return "" if on is None or self.target.paused else "AB"[on]

    def start(self) -> None:
        self._since = self._clock()
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def set_load(self, target: LoadTarget) -> None:
        """The keys' target: the side on turn takes it now, and its turn starts again (a whole turn at it)."""
        with self._lock:
            old, self.target = self.target, target
            if self._on is not None and target != old:
                self.sides[self._on].set_load(target)
                self._since = self._clock()

    def _run(self) -> None:
        while not all(side.wait_ready(POLL_S) for side in self.sides):  # the first turn's clock starts then
            if self._stop.is_set():
                return
        with self._lock:
            self._since = self._clock()
        while not self._stop.wait(POLL_S):
            with self._lock:
                if self.target.paused:
                    self._since = self._clock()  # a paused load's turn waits for the resume
                    continue
                if self._clock() - self._since < self.block_s or self._on is None:
                    continue
                resting = self.sides[self._on]
                resting.set_load(replace(self.target, paused=True))
                self._on = None
            self._rest(resting)
            if self._stop.is_set():  # the pair stops: no side takes the load again
                return
            with self._lock:
                self._turn += 1
                self._on = side_of(self._turn)
                self.sides[self._on].set_load(self.target)
                self._since = self._clock()

    def _rest(self, side: Engine) -> None:
        """Until nothing of ``side``'s is in flight (bounded: `REST_S`), or the pair stops."""
        deadline = time.monotonic() + REST_S
        while time.monotonic() < deadline and side.snapshot().in_flight and not self._stop.wait(POLL_S):
            pass
