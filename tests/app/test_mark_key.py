"""`b` in the live app: a prompt for a short label, and the mark goes to the engine's session; escape adds
none, and an engine that records nothing says so."""

from __future__ import annotations

import pytest

from tests.app.conftest import MakeApp, settle
from tests.support.fake_engine import FakeEngine


class MarkingEngine(FakeEngine):
    """A fake engine that records, as `EngineHandle` does when its session is on."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[str] = []

    def mark(self, label: str) -> None:
        self.marks.append(label)


@pytest.fixture
def marking() -> MarkingEngine:
    return MarkingEngine()


async def test_b_asks_for_a_label_and_marks_the_session(make_app: MakeApp, marking: MarkingEngine) -> None:
    app = make_app()
    app.engine = marking  # type: ignore[assignment]  # a fake, as conftest.make_app passes its own
    async with app.run_test() as pilot:
        await pilot.press("b")
        await settle(pilot)
        await pilot.press(*"knee", "space", *"here", "enter")
        await settle(pilot)
        assert marking.marks == ["knee here"]
        await pilot.press("b")
        await settle(pilot)
        await pilot.press("x", "escape")
        await settle(pilot)
        assert marking.marks == ["knee here"]


async def test_b_without_a_recording_says_so(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await pilot.press("b")
        await settle(pilot)
        assert any("not recorded" in n.message for n in app._notifications)
