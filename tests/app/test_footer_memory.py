"""The footer is rebuilt on every screen push and pop: the keys it drew before must be freed (a 60-minute
soak grew the face by 70 MB when each rebuild's keys stayed reachable through their data binding)."""

from __future__ import annotations

import gc

from textual.widgets._footer import FooterKey

from tests.app.conftest import MakeApp, settle


async def test_opening_help_many_times_keeps_no_old_footer_keys(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot)
        shown = len(app.query(FooterKey))
        assert shown > 5
        for _ in range(5):
            await pilot.press("question_mark")
            await pilot.press("escape")
        await settle(pilot)
        gc.collect()
        alive = sum(1 for obj in gc.get_objects() if isinstance(obj, FooterKey))
    # the keys on screen, plus at most one rebuild's worth not yet collected (5 rebuilds kept ~150 before)
    assert alive <= 2 * shown + 5, (alive, shown)
