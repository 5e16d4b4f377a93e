"""The footer is rebuilt when the keys it shows change (a knee found or lost, a resize), and only then: the
keys it drew before must be freed (a 60-minute soak grew the face by 70 MB when each rebuild's keys stayed
reachable through their data binding), and a screen push and pop that changes no key rebuilds nothing."""

from __future__ import annotations

import gc
from dataclasses import replace

from textual.widgets._footer import FooterKey

from tests.app.conftest import MakeApp, settle
from tests.support.fake_engine import FakeEngine
from tui.app.app import TokentopApp


async def _offers_knee(app: TokentopApp, pilot: object, offered: bool) -> None:
    """Wait (a bounded number of refreshes) until the footer's keys do, or do not, include `k`."""
    for _ in range(50):  # the footer rebuilds after a refresh (a busy machine: more than one pause)
        await settle(pilot)  # type: ignore[arg-type]
        if ("knee" in [key.action for key in app.screen.query(FooterKey)]) == offered:
            return
    raise AssertionError(f"the footer {'never' if offered else 'still'} offers `k`")


async def test_footer_rebuilds_keep_no_old_keys_and_a_push_and_pop_rebuilds_nothing(
    make_app: MakeApp, engine: FakeEngine
) -> None:
    app = make_app()
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot)
        drawn = list(app.screen.query(FooterKey))
        shown = len(drawn)
        assert shown > 5 and "knee" in [key.action for key in drawn]
        await pilot.press("question_mark")
        await pilot.press("escape")
        await settle(pilot)
        assert list(app.screen.query(FooterKey)) == drawn  # the very same keys: nothing was rebuilt
        with_knee = engine.snap
        for seq in range(100, 110, 2):  # ten rebuilds: `k` leaves the footer and comes back, five times
            engine.snap = replace(with_knee, seq=seq, knee=None)
            app.poll()
            await _offers_knee(app, pilot, False)
            engine.snap = replace(with_knee, seq=seq + 1)
            app.poll()
            await _offers_knee(app, pilot, True)
        gc.collect()
        alive = sum(1 for obj in gc.get_objects() if isinstance(obj, FooterKey))
    # the keys on screen, plus at most one rebuild's worth not yet collected (5 rebuilds kept ~150 before)
    assert alive <= 2 * shown + 5, (alive, shown)
