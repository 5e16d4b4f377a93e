"""Time a key until the app has painted its result: shared by the perf scripts that measure responsiveness.

A Textual app under the test driver still composes every frame (`Screen._compositor_refresh` hands each
update to `App._display`, which the headless driver then drops), so wrapping `_display` tells when a frame
of a given screen was made. Waiting only for the screen stack to change timed the key's dispatch, not what
a person sees: a screen kept installed is "mounted" at once and painted later.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from textual.app import App
from textual.screen import Screen


class PaintClock:
    """Records, per screen, when the app last composed a frame of it (perf_counter seconds)."""

    def __init__(self, app: App[Any]) -> None:
        self.app = app
        self.painted: dict[int, float] = {}
        display = app._display

        def timed_display(screen: Screen[Any], renderable: Any) -> None:
            display(screen, renderable)
            if renderable is not None:
                self.painted[id(screen)] = time.perf_counter()

        app._display = timed_display  # type: ignore[method-assign]

    async def key_to_paint(self, key: str, *, help_up: bool, deadline_s: float) -> float:
        """Post ``key`` as a terminal would and wait until a frame of the screen it leads to (a pushed one
        when ``help_up``, else the base screen) was composed after the press; seconds, capped at
        ``deadline_s``."""
        app = self.app
        t0 = time.perf_counter()
        app.simulate_key(key)
        while (waited := time.perf_counter() - t0) < deadline_s:
            top = app.screen
            arrived = (len(app.screen_stack) > 1) == help_up
            if arrived and self.painted.get(id(top), 0.0) > t0:
                return self.painted[id(top)] - t0
            await asyncio.sleep(0.002)
        return min(waited, deadline_s)
