"""The worker <-> face wire (`tui.engine.wire`): every message survives pickling as its own type, and a batch
the worker's own code builds is what the face's store ingests."""

from __future__ import annotations

import pickle
from array import array
from multiprocessing import Pipe

from tui.engine.aggregate.series import Timeline
from tui.engine.aggregate.store import Store
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.load.worker import Worker, _Lane
from tui.engine.records import RequestRecord
from tui.engine.stream.openai import StreamAccumulator, apply_chunk
from tui.engine.wire import (
    ApplyShare,
    Batch,
    Goodbye,
    Health,
    LaneDelta,
    Stop,
    WorkerFailed,
    WorkerShare,
    WorkerSpec,
)

MS = 1_000_000


def _round_trip(obj: object) -> object:
    return pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _record(rid: int) -> RequestRecord:
    chunks = array("q", [100 * MS + i * MS for i in range(5)])
    return RequestRecord(
        request_id=rid, worker=0, seq=rid, level_id=2, sent_ns=90 * MS, first_content_ns=chunks[0],
        end_ns=chunks[-1], chunk_ns=chunks, chunk_tokens=array("q", [1] * 5), output_tokens=5,
        output_source="usage", error="x", retries=1,
    )  # fmt: skip


def test_every_message_round_trips_as_its_own_type() -> None:
    share = WorkerShare(level_id=3, mode="rate", rate=2.5, max_concurrency=4, seed=7)
    spec = WorkerSpec(1, 2, TargetConfig("http://127.0.0.1:1/v1"), WorkloadConfig(), "m", EngineOptions())
    for msg in (ApplyShare(share), Stop(True, 2.5), WorkerFailed("boom"), Goodbye(), spec):
        back = _round_trip(msg)
        assert type(back) is type(msg) and back == msg
    delta = LaneDelta(5, 2, 90 * MS, "hi", 2, 100 * MS, array("q", [1, 2]).tobytes(), None)
    batch = Batch(
        worker=1, t_ns=200 * MS, level_id=2, level_at_ns=150 * MS, in_flight=3, lanes=[delta, delta],
        tokens=9, records=[_record(7)], health=Health(0.5, 0.25), notices=["n"],
        health_window=Health(1.0, 0.5),
    )  # fmt: skip
    back = _round_trip(batch)
    assert isinstance(back, Batch) and back == batch
    assert all(type(d) is LaneDelta for d in back.lanes) and back.lanes[0].text == "hi"
    (rec,) = back.records
    assert isinstance(rec, RequestRecord) and rec == batch.records[0] and rec.chunk_ns == _record(7).chunk_ns
    assert type(back.health) is Health and back.health_window == Health(1.0, 0.5)
    empty = _round_trip(Batch(0, 1, 1))
    assert isinstance(empty, Batch)
    assert empty._replace(lanes=(), records=()) == Batch(0, 1, 1) and not empty.lanes


def _chunk(acc: StreamAccumulator, text: str, completion_tokens: int, now_ns: int) -> None:
    usage = {"completion_tokens": completion_tokens}
    apply_chunk(acc, {"choices": [{"delta": {"content": text}}], "usage": usage}, now_ns)


async def test_a_batch_built_by_the_worker_is_what_the_store_ingests() -> None:
    """The worker's own `batch()` (lane deltas, then the finished record), pickled as it is sent, feeds a
    face's store: the live detail and the finished one agree."""
    cmd_r, cmd_w = Pipe(duplex=False)
    out_r, out_w = Pipe(duplex=False)
    spec = WorkerSpec(0, 1, TargetConfig("http://127.0.0.1:1/v1"), WorkloadConfig(), "m", EngineOptions())
    worker = Worker(spec, cmd_r, out_w)
    worker.level_id = 1
    store = Store(0, workers=1)
    store.begin_level(1, LoadTarget(concurrency=1), 0)
    record = RequestRecord(request_id=1, worker=0, seq=0, level_id=1, sent_ns=10 * MS)
    acc = StreamAccumulator()
    lane = worker.lanes[1] = _Lane(record, acc, worker.arrivals.level(1))
    for i in range(6):
        _chunk(acc, f"t{i} ", 2 * (i + 1), 60 * MS + 10 * i * MS)
        if i % 2:  # a batch every other chunk
            back = _round_trip(worker.batch())
            assert isinstance(back, Batch)
            store.ingest(back)
    live = store.detail(1, 200 * MS)
    assert live is not None and live.state == "streaming" and live.text == "t0 t1 t2 t3 t4 t5 "
    # and what arrived, from the stream still in flight: its tokens, its TTFT, one gap per later chunk
    arrived = store.levels[1]
    assert arrived.timeline.total(Timeline.TOK, 0) == 12 and arrived.timeline.total(Timeline.TOK_OK, 0) == 0
    assert arrived.ttft_log.total == 1 and arrived.gap_log.total == 5
    assert live.chunk_offsets_ms == (50.0, 60.0, 70.0, 80.0, 90.0, 100.0) and live.chunk_tokens == (2,) * 6
    # the request ends: what Worker.issue does once run_request has filled the record
    record.first_content_ns, record.end_ns = acc.chunk_ns[0], acc.chunk_ns[-1]
    record.chunk_ns, record.chunk_tokens = acc.chunk_ns, acc.chunk_tokens
    record.output_tokens, record.output_source = acc.tokens, "usage"
    del worker.lanes[1]
    final = worker._lane_delta(lane, final=True)
    assert final is None  # nothing new since the last batch
    worker.finished.append(record)
    back = _round_trip(worker.batch())
    assert isinstance(back, Batch) and back.records == [record]
    assert list(store.ingest(back)) == [record]
    done = store.detail(1, 200 * MS)
    assert done is not None and done.state == "ok" and done.text == live.text
    for name in ("chunk_offsets_ms", "chunk_tokens", "ttft_ms", "tpot_ms", "itl_chunk", "output_tokens"):
        assert getattr(done, name) == getattr(live, name), name
    for conn in (cmd_r, cmd_w, out_r, out_w):
        conn.close()
