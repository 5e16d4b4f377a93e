"""A worker batch in the session's form, made where the batch is made.

Encoding each batch (its finished records' chunk stamps above all) and compressing it were most of the
face's CPU per chunk. A worker whose run records a session encodes its own batch with this one function,
deflates the line and ships it beside the batch (`Batch.session`); the face appends those blocks to the
session's gzip stream as they came (`SessionRecorder.batch`), and encodes only a batch that came without
them (a replay's, a test's). Same code at both ends, same line.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

import orjson

from tui.engine.recording.plain_json import Encoder
from tui.engine.recording.stamps import stamp_counts
from tui.engine.wire import Batch, SessionPiece

LEVEL = 6
"""The session's deflate level (the face's own lines too)."""

NO_TEXT = {"LaneDelta": ("text", "reasoning")}
"""Without ``--record-text`` the streamed text is left out (the lanes replay their timing, blank)."""


def batch_drops(record_text: bool) -> dict[str, tuple[str, ...]]:
    """The fields a batch's session form writes blank."""
    return {} if record_text else dict(NO_TEXT)


def batch_encoder(record_text: bool, also: Mapping[str, tuple[str, ...]] | None = None) -> Encoder:
    """An encoder of batches as the session writes them (``also``: more fields to blank)."""
    return Encoder(drop={**(also or {}), **batch_drops(record_text)})


def encode_batch(enc: Encoder, batch: Batch) -> bytes:
    """``batch`` as the JSON of its session event's ``"b"``. A stream's chunk stamps are written once, in
    its finished record: its lane deltas carry only their count (`tui.engine.recording.stamps`)."""
    lanes = [stamp_counts(d) for d in batch.lanes]
    value = enc.encode(batch._replace(lanes=lanes, session=None))["v"]
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)


def batch_tail(line: bytes) -> bytes:
    """What follows the time in a batch event's line: ``,"b":`` the batch ``}`` and the newline."""
    return b',"b":%s}\n' % line


def session_piece(enc: Encoder, batch: Batch) -> SessionPiece:
    """``batch``'s line after its time, deflated on its own (no reference reaches before it) and ended on a
    sync flush, so it can be spliced into any deflate stream at a flush."""
    tail = batch_tail(encode_batch(enc, batch))
    z = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
    return SessionPiece(z.compress(tail) + z.flush(zlib.Z_SYNC_FLUSH), zlib.crc32(tail), len(tail))
