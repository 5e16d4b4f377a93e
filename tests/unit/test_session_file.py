"""The session file and its codec: values come back as they went in (a field added since fills with its
default), a cut file reads up to its cut, and a file that is not a session fails in one line naming it."""

from __future__ import annotations

import errno
import gzip
import io
import json
from array import array
from pathlib import Path

import pytest

from tui.engine.config import EngineOptions, LengthDist, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.recording.file import FORMAT_VERSION, SessionError, SessionWriter, read_session
from tui.engine.recording.plain_json import Decoder, Encoder
from tui.engine.recording.recorder import SessionRecorder
from tui.engine.records import RequestRecord
from tui.engine.wire import Batch, Health, LaneDelta


def _batch() -> Batch:
    stamps = array("q", [150, 250, 400])
    rec = RequestRecord(7, 0, 3, 1, 100, first_content_ns=150, end_ns=400, chunk_ns=stamps, output_tokens=3)
    lane = LaneDelta(8, 1, 200, "hello", 2, 260, array("q", [260]).tobytes(), None, reasoning="hm")
    return Batch(0, 500, 1, None, 1, [lane], 5, [rec], Health(0.5, 0.1), ("a notice",), None, 2)


def test_a_batch_and_the_config_come_back_as_they_went_in() -> None:
    enc = Encoder()
    batch = _batch()
    workload = WorkloadConfig(isl=64, osl_dist=LengthDist("uniform", 4, 9), scenarios=())
    written = json.loads(json.dumps([enc.encode(batch), enc.encode(workload)]))
    dec = Decoder(json.loads(json.dumps(enc.schema)))
    got_batch, got_workload = dec.decode(written)
    assert got_batch == batch and got_workload == workload
    assert got_batch.records[0].chunk_ns == array("q", [150, 250, 400])


def test_stamps_are_written_as_the_first_and_then_each_difference_as_a_number() -> None:
    enc = Encoder()
    big = 10**18
    assert enc.encode(array("q", [big, big + 5, big - 3])) == {"~q": [big, 5, -8]}
    assert enc.encode(array("q", [7])) == {"~q": [7]} and enc.encode(array("q")) == {"~q": []}
    written = enc.encode(_batch())
    assert written["v"][7][0]["v"][9] == {"~q": [150, 100, 150]}  # the record's chunk_ns
    assert all(type(d) is int for d in written["v"][7][0]["v"][9]["~q"])  # numbers orjson writes as such


def test_fields_added_or_removed_since_the_recording_are_filled_or_dropped() -> None:
    enc = Encoder()
    written = enc.encode(Health(1.0, 0.2, 3))
    schema = {"Health": ["loop_lag_p99_ms", "cpu_share", "gone_field"]}  # an older writer's fields
    health = Decoder(schema).decode({"~": "Health", "v": [1.0, 0.2, 99]})
    assert health == Health(1.0, 0.2)  # `tasks` (not written) takes its default; `gone_field` is dropped
    assert Decoder(enc.schema).decode(written) == Health(1.0, 0.2, 3)


def test_the_api_key_and_without_record_text_the_text_are_never_written(tmp_path: Path) -> None:
    path = tmp_path / "s.gz"
    target = TargetConfig(
        base_url="http://127.0.0.1:1/v1", api_key="sk-SECRET", headers=(("x-key", "SECRET2"),)
    )
    rec = SessionRecorder(path, target=target, workload=WorkloadConfig(), load=LoadTarget(concurrency=2),
                          options=EngineOptions(), workers=1, t0_ns=0, started_at_s=0.0)  # fmt: skip
    rec.batch(_batch())
    rec.close()
    raw = gzip.decompress(path.read_bytes()).decode()
    assert "SECRET" not in raw and "hello" not in raw and "x-key" in raw
    session = read_session(path)
    lane = Decoder(session.header["schema"])._build("Batch", session.of_kind("b")[0]["b"]).lanes[0]
    assert lane.text == "" and lane.reasoning == "" and lane.tokens == 2


def test_a_cut_file_reads_every_whole_line_before_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "s.gz"
    writer = SessionWriter(path, {"t0_ns": 0})
    for i in range(50):
        writer.write({"k": "mark", "t": i, "label": f"m{i}"}, flush=True)
    writer.write({"k": "mark", "t": 99, "label": "unflushed"})  # still in the compressor when "killed"
    data = path.read_bytes()  # no gzip trailer: the writer never closed
    for cut in (len(data), len(data) - 3):
        (tmp_path / "cut.gz").write_bytes(data[:cut])
        session = read_session(tmp_path / "cut.gz")
        labels = [e["label"] for e in session.events]
        assert session.cut and labels == [f"m{i}" for i in range(len(labels))]
        assert len(labels) >= (50 if cut == len(data) else 45)
    writer.close()
    whole = read_session(path)
    assert [e["label"] for e in whole.events][-1] == "unflushed"


def test_event_times_never_go_back(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s.gz", {"t0_ns": 0})
    for t in (5, 3, 9, 1):
        writer.write({"k": "mark", "t": t, "label": ""})
    writer.write({"k": "end", "t": 0})
    writer.close()
    session = read_session(tmp_path / "s.gz")
    assert [e["t"] for e in session.events] == [5, 5, 9, 9, 9] and not session.cut


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"levels": []}', "a results file, not a session"),
        (b"hello", "not a tokentop session"),
        (gzip.compress(b"not json\n", mtime=0), "a line is not JSON"),
        (gzip.compress(b'{"x": 1}\n', mtime=0), "no session header"),
        (
            gzip.compress(json.dumps({"session": FORMAT_VERSION + 1}).encode() + b"\n", mtime=0),
            "is newer than this",
        ),
        (b"\x1f\x8b\x08", "no header"),
        (b"", "an empty session (0 bytes: nothing was written"),
        (b"\x1f\x8bgarbage-not-deflate", "not gzip"),
    ],
)
def test_a_file_that_is_not_a_readable_session_fails_in_one_line_naming_it(
    tmp_path: Path, content: bytes, says: str
) -> None:
    path = tmp_path / "bad.gz"
    path.write_bytes(content)
    with pytest.raises(SessionError) as caught:
        read_session(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and says in message and "\n" not in message


def test_a_missing_file_is_named() -> None:
    with pytest.raises(SessionError, match=r"nowhere\.gz: cannot read"):
        read_session(Path("/nonexistent/nowhere.gz"))


def test_lane_stamps_are_written_once_and_come_back_in_order(tmp_path: Path) -> None:
    """A stream's stamps are in its record only; the replay gives each lane delta its own slice back, and a
    stream cut before its record gets none."""
    from tui.engine.host.playback_engine import PlaybackEngine

    def lane(request_id: int, stamps: list[int]) -> LaneDelta:
        return LaneDelta(request_id, 1, 100, "", len(stamps), 110, array("q", stamps).tobytes(), None)

    whole = array("q", [110, 120, 130, 140])
    record = RequestRecord(5, 0, 1, 1, 100, first_content_ns=110, end_ns=150, chunk_ns=whole, output_tokens=4)
    batches = [
        Batch(0, 1, 1, lanes=[lane(5, [110, 120]), lane(9, [115])]),
        Batch(0, 2, 1, lanes=[lane(5, [130, 140]), lane(9, [125])]),
        Batch(0, 3, 1, lanes=[lane(5, [])], records=[record]),
    ]
    path = tmp_path / "s.gz"
    target = TargetConfig(base_url="http://127.0.0.1:1/v1")
    rec = SessionRecorder(path, target=target, workload=WorkloadConfig(), load=LoadTarget(),
                          options=EngineOptions(), workers=1, t0_ns=0, started_at_s=0.0)  # fmt: skip
    for batch in batches:
        rec.batch(batch)
    rec.close()
    raw = gzip.decompress(path.read_bytes())
    assert raw.count(b'"~q"') == 1  # the stamps once, in the record
    replay = PlaybackEngine(read_session(path))
    restored = [
        replay._stamps.restore(replay.config.decoder._build("Batch", e["b"]))
        for e in replay.session.of_kind("b")
    ]
    assert [d.chunk_ns for b in restored for d in b.lanes if d.request_id == 5] == [
        d.chunk_ns for b in batches for d in b.lanes if d.request_id == 5
    ]
    assert [d.chunk_ns for b in restored for d in b.lanes if d.request_id == 9] == [
        b"",
        b"",
    ]  # no record: cut


def test_every_class_a_batch_can_hold_is_in_the_header(tmp_path: Path) -> None:
    """A value type first seen mid-run (the arrival aggregates, say) must already be in the header."""
    from tui.engine.wire import Arrivals

    path = tmp_path / "s.gz"
    target = TargetConfig(base_url="http://127.0.0.1:1/v1")
    rec = SessionRecorder(path, target=target, workload=WorkloadConfig(), load=LoadTarget(),
                          options=EngineOptions(), workers=1, t0_ns=0, started_at_s=0.0)  # fmt: skip
    stamps = array("q", [3, 4]).tobytes()
    arrivals = Arrivals(1, stamps, stamps, stamps, stamps, stamps, stamps)
    rec.batch(Batch(0, 1, 1, arrivals=[arrivals]))
    rec.close()
    session = read_session(path)
    assert "Arrivals" in session.header["schema"]
    (event,) = session.of_kind("b")
    assert Decoder(session.header["schema"])._build("Batch", event["b"]).arrivals == [arrivals]


class FullDisk(io.BytesIO):
    """A file on a disk with ``room`` bytes free: a write past it fails as a full disk does (ENOSPC), as
    a buffered file's flush would; what fitted stays."""

    def __init__(self, room: int, path: Path) -> None:
        super().__init__()
        self.room, self.path = room, path

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if self.tell() + len(data) > self.room:
            super().write(data[: self.room - self.tell()])
            self.path.write_bytes(self.getvalue())
            raise OSError(errno.ENOSPC, "No space left on device")
        n = super().write(data)
        self.path.write_bytes(self.getvalue())
        return n


def _recorder(path: Path, file: FullDisk) -> SessionRecorder:
    return SessionRecorder(
        path, target=TargetConfig(base_url="http://127.0.0.1:1/v1"), workload=WorkloadConfig(),
        load=LoadTarget(), options=EngineOptions(), workers=1, t0_ns=0, started_at_s=0.0, file=file,
    )  # fmt: skip


@pytest.mark.parametrize("room", [0, 6000])
def test_a_full_disk_stops_the_recording_once_and_says_what_was_lost_and_from_when(
    tmp_path: Path, room: int
) -> None:
    path = tmp_path / "s.tokentop-session.gz"
    rec = _recorder(path, FullDisk(room, path))
    for i in range(400):  # a mark a second, each flushed: about 40 bytes compressed each
        rec.mark(i * 1_000_000_000, f"mark {i} " + "x" * (i % 50))
    rec.close()  # never raises, and nothing after the failure is attempted
    lost = rec.lost
    assert lost is not None and lost.why == "disk full"
    if room == 0:  # not even the header: nothing of the run
        assert lost.kept_to_s is None and "nothing of the run was saved" in lost.line()
        assert lost.at_s == 0.0
        with pytest.raises(SessionError, match=r"no header|empty session"):
            read_session(path)
        return
    assert lost.kept_to_s is not None and 0 < lost.kept_to_s <= lost.at_s <= lost.kept_to_s + 1
    at = f"{int(lost.at_s) // 60:02d}:{int(lost.at_s) % 60:02d}"
    assert lost.line().startswith(f"session: cannot write {path} (disk full at {at}): the recording stopped")
    assert lost.exit_line() == f"session incomplete (disk full at {at}): {path}"
    session = read_session(path)  # what fitted reads, up to its cut
    assert session.cut
    marks = [e["label"] for e in session.of_kind("mark")]
    assert marks == [f"mark {i} " + "x" * (i % 50) for i in range(len(marks))]
    # the file holds the run at least up to where the line says (the last whole flush), and nothing past the
    # failure; the failed write's part that fitted may hold a few more whole lines
    assert int(lost.kept_to_s) + 1 <= len(marks) <= int(lost.at_s) + 1
