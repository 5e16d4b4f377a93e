"""An embeddings run in the app: the lanes are requests (no text to wait for), the level table gives input
tok/s and the answer's latency, and no TTFT, ITL or OSL column reads 0."""

from __future__ import annotations

from dataclasses import replace

from tests.app.conftest import MakeApp, screen_text, settle
from tests.support import frozen
from tests.support.fake_engine import FakeEngine
from tui.app.widgets.level_table import LevelTable


async def test_an_embeddings_run_shows_requests_and_input_throughput(
    make_app: MakeApp, engine: FakeEngine
) -> None:
    lanes = tuple(replace(lane, text_tail="", reasoning_tail="", output_tokens=0) for lane in frozen.LANES)
    levels = tuple(
        replace(lv, output_tps=0.0, mean_isl=32.0, mean_osl=0.0, total_tps=5000.0) for lv in frozen.LEVELS
    )
    engine.snap = replace(engine.snap, endpoint="embeddings", lanes=lanes, levels=levels)
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.poll(force=True)
        await settle(pilot)
        text = screen_text(app)
        assert "waiting for the answer…" in text and "waiting for first token" not in text
        labels = [label for _, label in app.query_one(LevelTable).columns_shown]
        assert labels[:3] == ["level", "in tok/s", "lat p50/90/99"]
        assert not {"TTFT p50/90/99", "ITL p50/90/99", "ISL/OSL", "tok/s"} & set(labels)
        assert "5,000.0" in text
