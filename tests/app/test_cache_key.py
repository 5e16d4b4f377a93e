"""`c` in the live app: the engine is asked to drop the server's prefix cache off the UI thread, and its one
line (done, or refused with how to enable it) is shown; an engine that cannot says so."""

from __future__ import annotations

import threading

from tests.app.conftest import MakeApp, settle
from tests.support.fake_engine import FakeEngine
from tui.engine.host.cache_reset import ResetOutcome

REFUSED = ResetOutcome(False, "the server refused to drop its prefix cache (/reset_prefix_cache: 404): ...")


class ResettingEngine(FakeEngine):
    """A fake engine with `EngineHandle.reset_cache`'s shape, answering as a refusing server would."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[threading.Thread] = []

    def reset_cache(self) -> ResetOutcome:
        self.threads.append(threading.current_thread())
        return REFUSED


async def test_c_asks_the_engine_off_the_ui_thread_and_shows_its_line(make_app: MakeApp) -> None:
    app = make_app()
    engine = ResettingEngine()
    app.engine = engine  # type: ignore[assignment]  # a fake, as conftest.make_app passes its own
    async with app.run_test() as pilot:
        await pilot.press("c")
        await app.workers.wait_for_complete()
        await settle(pilot)
        assert len(engine.threads) == 1 and engine.threads[0] is not threading.main_thread()
        shown = [n for n in app._notifications if n.message == REFUSED.line]
        assert len(shown) == 1 and shown[0].severity == "warning"


async def test_c_with_an_engine_that_cannot_reset_says_so(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await pilot.press("c")
        await settle(pilot)
        assert any("cannot ask the server to drop its cache" in n.message for n in app._notifications)
