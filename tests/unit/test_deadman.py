"""The worker-side dead-man switch: on a fake clock, and as the relay that stops a worker."""

from __future__ import annotations

import multiprocessing
import pickle
import threading

from tui.engine.load.deadman import HEARTBEAT, DeadManSwitch, relay_commands
from tui.engine.wire import ApplyShare, Stop, WorkerShare


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_switch_expires_after_the_last_feed_and_not_before() -> None:
    clock = FakeClock()
    switch = DeadManSwitch(5.0, clock)
    clock.t += 4.9
    assert not switch.expired and abs(switch.remaining_s() - 0.1) < 1e-9
    switch.feed()
    clock.t += 4.9
    assert not switch.expired
    clock.t += 0.1
    assert switch.expired and switch.remaining_s() == 0.0


def test_the_relay_forwards_commands_drops_heartbeats_and_stops_the_worker_when_silent() -> None:
    src_r, src_w = multiprocessing.Pipe(duplex=False)
    sink_r, sink_w = multiprocessing.Pipe(duplex=False)
    why: list[str] = []
    relay = threading.Thread(
        target=lambda: why.append(relay_commands(src_r, sink_w, DeadManSwitch(0.3))), daemon=True
    )
    relay.start()
    share = ApplyShare(WorkerShare(level_id=1, concurrency=2))
    for _ in range(3):
        src_w.send_bytes(HEARTBEAT)
    src_w.send_bytes(pickle.dumps(share))
    assert sink_r.poll(2.0) and sink_r.recv() == share  # the heartbeats never reach the worker
    relay.join(5.0)
    assert why == ["silent"]
    assert sink_r.recv() == Stop(False, 0.0)
    assert not sink_r.poll(0.1) or _eof(sink_r)


def test_the_relay_stops_the_worker_at_once_when_the_agent_pipe_closes() -> None:
    src_r, src_w = multiprocessing.Pipe(duplex=False)
    sink_r, sink_w = multiprocessing.Pipe(duplex=False)
    src_w.close()
    assert relay_commands(src_r, sink_w, DeadManSwitch(60.0)) == "closed"
    assert sink_r.recv() == Stop(False, 0.0)


def _eof(conn: object) -> bool:
    try:
        conn.recv_bytes()  # type: ignore[attr-defined]
    except EOFError:
        return True
    return False
