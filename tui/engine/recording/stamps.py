"""A stream's chunk stamps are written once in a session: in its finished record. Each lane delta carries
only how many stamps (and token counts) it brought, and a replay takes them back from the record, in
order, so the lanes replay as they were drawn. A stream still in flight at a cut has no record: its
deltas come back without stamps."""

from __future__ import annotations

from array import array
from typing import Any

from tui.engine.recording.file import Session
from tui.engine.recording.plain_json import Decoder
from tui.engine.wire import Batch, LaneDelta


def stamp_counts(delta: LaneDelta) -> LaneDelta:
    """``delta`` with its stamps (and token counts) replaced by how many there are, when it has any."""
    stamps, counts = delta.chunk_ns, delta.chunk_tokens
    if not stamps and not counts:
        return delta
    # an int where bytes go: only this module writes and reads it (`LaneStamps` restores the bytes)
    n_stamps: Any = len(stamps) // 8 if stamps else stamps
    n_counts: Any = len(counts) // 8 if counts else counts
    return delta._replace(chunk_ns=n_stamps, chunk_tokens=n_counts)


def record_index(session: Session, decoder: Decoder) -> dict[int, Any]:
    """Where each finished request's record is: by request id, its batch event and place in it."""
    schema = session.header.get("schema", {})
    try:
        records_at = schema["Batch"].index("records")
        id_at = schema["RequestRecord"].index("request_id")
    except (KeyError, ValueError):
        return {}
    out: dict[int, Any] = {}
    for e in session.events:
        if e.get("k") == "b":
            for i, rec in enumerate(_records(e["b"], records_at)):
                out[int(rec["v"][id_at])] = (e, records_at, i)
    return out


def _records(batch: list[Any], records_at: int) -> list[Any]:
    records = batch[records_at] if records_at < len(batch) else []
    if isinstance(records, dict):  # a tuple: {"~t": [...]}
        return list(records.get("~t", []))
    return list(records)


class LaneStamps:
    """Puts the stamps back into a replayed batch's lane deltas, in the order they came."""

    def __init__(self, records: dict[int, Any], decoder: Decoder) -> None:
        """``records``: `record_index`; ``decoder``: the session's."""
        self._encoded = records
        self._decoder = decoder
        self._open: dict[int, tuple[Any, list[int]]] = {}
        """Requests whose lanes are being replayed: the decoded record and how many stamps and token
        counts its deltas took so far (dropped once the record itself is replayed)."""

    def restore(self, batch: Batch) -> Batch:
        """``batch`` with each lane delta's stamps and token counts back as bytes."""
        if any(isinstance(d.chunk_ns, int) or isinstance(d.chunk_tokens, int) for d in batch.lanes):
            batch = batch._replace(lanes=[self._delta(d) for d in batch.lanes])
        for rec in batch.records:
            self._open.pop(rec.request_id, None)
        return batch

    def _delta(self, d: LaneDelta) -> LaneDelta:
        stamps, counts = d.chunk_ns, d.chunk_tokens
        if not isinstance(stamps, int) and not isinstance(counts, int):
            return d
        if d.request_id not in self._open:
            where = self._encoded.get(d.request_id)
            record = None
            if where is not None:
                event, records_at, i = where
                record = self._decoder.decode(_records(event["b"], records_at)[i])
            self._open[d.request_id] = (record, [0, 0])
        record, used = self._open[d.request_id]
        if isinstance(stamps, int):
            stamps = _take(record.chunk_ns if record is not None else None, used, 0, stamps)
        if isinstance(counts, int):
            counts = _take(record.chunk_tokens if record is not None else None, used, 1, counts)
        return d._replace(chunk_ns=stamps, chunk_tokens=counts)


def _take(values: array[int] | None, used: list[int], which: int, n: int) -> bytes:
    """The next ``n`` of ``values`` as raw bytes (none where the record is missing: a cut)."""
    start = used[which]
    used[which] = start + n
    return values[start : start + n].tobytes() if values is not None else b""
