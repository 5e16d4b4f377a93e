"""Screens from frozen data, compared with files under tests/app/snapshots/.

Each snapshot is the screen as ANSI text (`cat` one to see it in colour), so it pins both the layout and
the theme colours. Regenerate after an intended change with `TOKENTOP_UPDATE_SNAPSHOTS=1 pytest
tests/app/test_snapshots.py` and review the diff; a failing run leaves the actual screen (ANSI and SVG)
in tests/app/snapshots/_failed/.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

from tests.app.conftest import MakeApp, screen_text, settle

SNAPSHOTS = Path(__file__).parent / "snapshots"
FAILED = SNAPSHOTS / "_failed"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
@pytest.mark.parametrize("theme", ["dark", "light", "high-contrast"])
async def test_main_screen(make_app: MakeApp, theme: str, size: tuple[int, int]) -> None:
    app = make_app(theme=theme)
    name = f"main-{theme}-{size[0]}x{size[1]}"
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        app.poll(force=True)
        await settle(pilot)
        actual = screen_text(app, styles=True)
        expected_path = SNAPSHOTS / f"{name}.ansi"
        if os.environ.get("TOKENTOP_UPDATE_SNAPSHOTS"):
            SNAPSHOTS.mkdir(exist_ok=True)
            expected_path.write_text(actual, encoding="utf-8")
            app.save_screenshot(filename=f"{name}.svg", path=str(SNAPSHOTS))
            return
        assert expected_path.exists(), (
            f"no snapshot {expected_path.name}; run with TOKENTOP_UPDATE_SNAPSHOTS=1"
        )
        expected = expected_path.read_text(encoding="utf-8")
        if actual == expected:
            return
        FAILED.mkdir(parents=True, exist_ok=True)
        (FAILED / f"{name}.ansi").write_text(actual, encoding="utf-8")
        app.save_screenshot(filename=f"{name}.svg", path=str(FAILED))
    plain_diff = "\n".join(
        difflib.unified_diff(
            ANSI.sub("", expected).splitlines(),
            ANSI.sub("", actual).splitlines(),
            "expected",
            "actual",
            lineterm="",
        )
    )
    pytest.fail(
        f"{name} differs from its snapshot (see {FAILED}):\n{plain_diff or 'same text, colours differ'}"
    )


async def test_plots_built_off_the_ui_thread_draw_the_same_screen(make_app: MakeApp) -> None:
    app = make_app(plot_thread=True)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        app.poll(force=True)
        await app.workers.wait_for_complete()
        await settle(pilot)
        actual = screen_text(app, styles=True)
    assert actual == (SNAPSHOTS / "main-dark-160x50.ansi").read_text(encoding="utf-8")
