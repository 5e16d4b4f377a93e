"""The speed as a load mode: what the keys make of it, the handle's one timeline for every worker, and a
replay that falls behind its schedule saying so."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from tui.app import control
from tui.engine.config import LoadTarget, TraceConfig
from tui.engine.host.trace_clock import FIRST_START_NS, START_LEAD_NS, TraceClock
from tui.engine.load.trace_pacing import WARM_CONNECTIONS, TracePacer
from tui.engine.traces import TraceRequest, check_trace
from tui.engine.wire import WorkerShare

S = 1_000_000_000


def test_keys_scale_and_step_the_speed() -> None:
    t = LoadTarget(mode="trace", speed=1.0)
    assert control.scale(t, 2.0).speed == 2.0 and control.scale(t, 0.5).speed == 0.5
    assert [control.step(LoadTarget(mode="trace", speed=s), 1).speed for s in (1.0, 1.75, 2.0, 20.0)] == [
        1.25, 2.0, 2.5, 22.0,
    ]  # fmt: skip
    assert control.step(LoadTarget(mode="trace", speed=2.0), -1).speed == 1.75
    assert control.step(LoadTarget(mode="trace", speed=0.25), -1).speed == control.MIN_SPEED
    assert control.toggle_mode(t, 5.0) == t  # a replay's times are the trace's
    assert t.value == 1.0 and t.label() == "trace x1" and t.with_value(3).speed == 3.0


def test_the_clock_goes_on_from_where_the_replay_is() -> None:
    clock = TraceClock()
    clock.retarget(LoadTarget(mode="trace"), 0, new_level=False)
    assert clock.place().anchor_ns is None  # not started before every worker is up
    clock.start(-FIRST_START_NS + START_LEAD_NS, LoadTarget(mode="trace", speed=1.0))
    lead = START_LEAD_NS  # the first start is due FIRST_START_NS on: here at lead
    assert clock.position_ns(lead + 2 * S) == 2 * S
    # x4 from 2 s on: it takes effect a lead later, where the x1 timeline has got to by then
    clock.retarget(LoadTarget(mode="trace", speed=4.0), lead + 2 * S, new_level=True)
    assert clock.place() == (2 * lead + 2 * S, 2 * S + lead, 0)
    assert clock.position_ns(2 * lead + 3 * S) == 6 * S + lead  # one second at x4
    clock.retarget(LoadTarget(mode="trace", speed=4.0, paused=True), 2 * lead + 3 * S, new_level=False)
    assert clock.position_ns(9 * S) == 6 * S + lead  # a pause holds the place
    clock.retarget(LoadTarget(mode="trace", speed=1.0), 10 * S, new_level=True)
    assert clock.place() == (10 * S + lead, 6 * S + lead, 0)  # resumed where it was held
    clock.retarget(LoadTarget(mode="trace", speed=1.0, from_start=True), 11 * S, new_level=True)
    assert clock.place() == (11 * S + lead, 0, 1)  # bench's next level: the trace anew


def test_a_replay_behind_its_schedule_says_so_and_sends_everything(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(
        json.dumps({"timestamp": i, "input_length": 5, "output_length": 1}) + "\n" for i in range(20)
    ))  # fmt: skip
    notices: list[str] = []
    replay = TracePacer(check_trace(TraceConfig(path=str(path))), notice=notices.append)
    sent: list[tuple[int, TraceRequest]] = []

    async def send(share: WorkerShare, due_ns: int, entry: TraceRequest) -> None:
        sent.append((due_ns, entry))

    anchor = time.perf_counter_ns() - 50_000_000  # the trace began 50 ms ago: every send is late
    share = WorkerShare(level_id=1, mode="trace", speed=1.0, trace_anchor_ns=anchor)
    asyncio.run(replay.run(share, send))
    assert [e.input_tokens for _, e in sent] == [5] * 20 and [d - anchor for d, _ in sent] == [
        i * 1_000_000 for i in range(20)
    ]
    behind = [n for n in notices if "falling behind" in n]
    assert len(behind) == 1 and "cannot keep up" in behind[0]  # once per 10 s, not once a request
    assert any("reached the end" in n for n in notices)


def test_each_pass_of_a_trace_opens_its_connections_before_its_first_send(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(
        json.dumps({"timestamp": i, "input_length": 5, "output_length": 1}) + "\n" for i in range(3)
    ))  # fmt: skip
    replay = TracePacer(check_trace(TraceConfig(path=str(path))))
    events: list[object] = []

    async def warm(count: int) -> int:
        events.append(("warm", count))
        return count

    async def send(share: WorkerShare, due_ns: int, entry: TraceRequest) -> None:
        events.append("send")

    async def passes() -> None:
        anchor = time.perf_counter_ns() + 20_000_000
        await replay.run(WorkerShare(level_id=1, mode="trace", trace_anchor_ns=anchor), send, warm)
        # a new speed in the same pass keeps the connections it has; a new pass opens them again
        await replay.run(WorkerShare(level_id=2, mode="trace", trace_anchor_ns=anchor, speed=2.0), send, warm)
        anchor = time.perf_counter_ns() + 20_000_000
        await replay.run(WorkerShare(level_id=3, mode="trace", trace_anchor_ns=anchor, trace_epoch=1), send,
                         warm)  # fmt: skip

    asyncio.run(passes())
    assert events == [("warm", WARM_CONNECTIONS), *["send"] * 3, ("warm", WARM_CONNECTIONS), *["send"] * 3]
