"""A worker's batch in the session's form: the worker of a recorded run encodes and deflates it, and the face
splices those blocks into the session as the very line it would have encoded itself, in a gzip file whose
trailer checks out (`tui.engine.recording.batch_line`)."""

from __future__ import annotations

import asyncio
import gzip
import pickle
from array import array
from pathlib import Path

from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.load.worker import Worker
from tui.engine.recording.file import read_session
from tui.engine.recording.recorder import SessionRecorder
from tui.engine.records import RequestRecord
from tui.engine.wire import Batch, LaneDelta, WorkerSpec

TARGET = TargetConfig(base_url="http://127.0.0.1:1/v1")


def _worker_batch(options: EngineOptions) -> Batch:
    """A batch built by the real `Worker.batch`, with a finished record and lane deltas, as it is pickled."""

    async def build() -> Batch:
        worker = Worker(WorkerSpec(0, 1, TARGET, WorkloadConfig(), "m", options), None, None)  # type: ignore[arg-type]
        stamps = array("q", [150, 250, 400])
        rec = RequestRecord(
            1, 0, 0, 1, 100, first_content_ns=150, end_ns=400, chunk_ns=stamps, output_tokens=3
        )
        worker.finished.append(rec)
        worker.finished_lanes.append(LaneDelta(1, 1, 100, "hello", 3, 150, b"", None, reasoning="hm"))
        worker.finished_lanes.append(LaneDelta(2, 1, 120, "tok", 1, 260, array("q", [260]).tobytes(), None))
        return worker.batch()

    batch: Batch = pickle.loads(pickle.dumps(asyncio.run(build()), protocol=pickle.HIGHEST_PROTOCOL))
    return batch


def _session_lines(path: Path, options: EngineOptions, batch: Batch) -> list[bytes]:
    rec = SessionRecorder(path, target=TARGET, workload=WorkloadConfig(), load=LoadTarget(), options=options,
                          workers=1, t0_ns=0, started_at_s=0.0)  # fmt: skip
    rec.batch(batch)
    rec.close()
    lines = gzip.decompress(path.read_bytes()).splitlines()
    return [line.split(b',"b":', 1)[1] for line in lines if line.startswith(b'{"k":"b"')]


def test_the_face_writes_a_recorded_workers_batch_as_the_line_it_would_have_encoded(tmp_path: Path) -> None:
    for record_text in (False, True):
        options = EngineOptions(record=str(tmp_path / "unused"), record_text=record_text)
        batch = _worker_batch(options)
        assert batch.session is not None  # encoded by the worker
        shipped = _session_lines(tmp_path / f"w{record_text}.gz", options, batch)
        encoded = _session_lines(tmp_path / f"f{record_text}.gz", options, batch._replace(session=None))
        assert shipped == encoded and len(shipped) == 1
        assert (b"hello" in shipped[0]) is record_text
    session = read_session(tmp_path / "wTrue.gz")
    (event,) = session.of_kind("b")
    assert event["b"][7][0]["v"][9] == {"~q": [150, 100, 150]}  # the record's stamps, once
    assert event["b"][5][1]["v"][6] == 1  # the live lane's stamps: their count (`stamps.stamp_counts`)


def test_a_worker_of_a_run_that_records_nothing_encodes_nothing() -> None:
    assert _worker_batch(EngineOptions()).session is None


def test_pieces_spliced_between_the_faces_own_lines_read_back_whole_and_cut(tmp_path: Path) -> None:
    options = EngineOptions(record=str(tmp_path / "unused"))
    batch = _worker_batch(options)
    path = tmp_path / "s.gz"
    rec = SessionRecorder(path, target=TARGET, workload=WorkloadConfig(), load=LoadTarget(), options=options,
                          workers=1, t0_ns=0, started_at_s=0.0)  # fmt: skip
    for i in range(3):
        rec.notice(10 + i, f"notice {i}")  # the face's own lines, compressed by its own stream
        rec.batch(batch)
    rec._writer.flush_if_due()
    rec._writer._flushed_at = 0.0  # a second has passed: the next line flushes
    rec.mark(20, "cut here")
    cut = path.read_bytes()  # as a kill -9 leaves it: no trailer
    rec.close()
    whole = gzip.decompress(path.read_bytes())  # checks the trailer's CRC and length
    assert whole.count(b'{"k":"b"') == 3 and whole.count(b'"notice"') == 3
    session = read_session(path)
    assert not session.cut and [e["k"] for e in session.events][:6] == ["notice", "b"] * 3
    cut_path = tmp_path / "cut.gz"
    cut_path.write_bytes(cut)
    kept = read_session(cut_path)
    assert kept.cut and [e["k"] for e in kept.events] == ["notice", "b"] * 3 + ["mark"]


def test_two_crcs_combine_into_the_crc_of_the_joined_bytes() -> None:
    import random
    import zlib

    from tui.engine.recording.crc import crc32_combine

    rng = random.Random(4)
    for n1, n2 in ((0, 0), (0, 7), (9, 0), (1, 1), (100, 20_000), (3, 200_001)):  # the last: past the zeros
        a, b = rng.randbytes(n1), rng.randbytes(n2)
        assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
