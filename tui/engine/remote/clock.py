"""One timebase across machines: a node's clock offset to the face's, estimated from the fastest of several
round trips, and the shift that moves a worker's stamps into the face's clock.

Every duration of a request is a difference of stamps from one process, exact on any host; only placing
stamps into the face's windows needs the offset. On the face's own host (same ``boot_id``: one
CLOCK_MONOTONIC) the offset is exactly 0 and bytes pass untouched.
"""

from __future__ import annotations

import pickle
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tui.engine.records import RequestRecord
from tui.engine.wire import Batch, LaneDelta

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
ROUND_TRIPS = 16
"""Round trips per estimate: the fastest one bounds the error best."""


def read_boot_id(path: str = BOOT_ID_PATH) -> str:
    """This host's boot id ("" where the kernel has none: then no two hosts count as one)."""
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class ClockEstimate:
    """A node's clock against the face's: ``node_ns - offset_ns`` is face time, within ``bound_ns``."""

    offset_ns: int
    rtt_ns: int
    """The fastest round trip (the estimate's own)."""
    bound_ns: int
    """|error| <= this: half that round trip (0 on the same host)."""
    same_host: bool

    @property
    def offset_ms(self) -> float:
        return self.offset_ns / 1e6

    @property
    def bound_ms(self) -> float:
        return self.bound_ns / 1e6


SAME_HOST = ClockEstimate(0, 0, 0, True)


def offset_from_samples(samples: Sequence[tuple[int, int, int]]) -> ClockEstimate:
    """(face send, node reading, face receive) triples -> the estimate from the one with the shortest
    round trip (Cristian / NTP minimum filter): offset = node - midpoint, error <= RTT/2."""
    if not samples:
        raise ValueError("no clock samples")
    t0, node, t1 = min(samples, key=lambda s: s[2] - s[0])
    rtt = t1 - t0
    return ClockEstimate(node - (t0 + t1) // 2, rtt, (rtt + 1) // 2, False)


def estimate_offset(
    read_node: Callable[[], int], face_ns: Callable[[], int], rounds: int = ROUND_TRIPS
) -> ClockEstimate:
    """``rounds`` round trips to ``read_node`` (a blocking call returning the node's clock), timed by
    ``face_ns``."""
    samples = []
    for _ in range(rounds):
        t0 = face_ns()
        node = read_node()
        t1 = face_ns()
        samples.append((t0, node, t1))
    return offset_from_samples(samples)


def node_clock(
    boot_id: str, read_node: Callable[[], int], face_ns: Callable[[], int], own_boot_id: str | None = None
) -> ClockEstimate:
    """A node's clock: exactly the face's when its ``boot_id`` is the face's own (one CLOCK_MONOTONIC, no
    estimate), else `estimate_offset`."""
    own = read_boot_id() if own_boot_id is None else own_boot_id
    if boot_id and boot_id == own:
        return SAME_HOST
    return estimate_offset(read_node, face_ns)


def _shift(v: int | None, d: int) -> int | None:
    return None if v is None else v + d


def _shift_stamps(raw: bytes, d: int) -> bytes:
    if not raw:
        return raw
    a = array("q")
    a.frombytes(raw)
    return array("q", [x + d for x in a]).tobytes()


def _shift_record(rec: RequestRecord, d: int) -> RequestRecord:
    return replace(
        rec,
        sent_ns=rec.sent_ns + d,
        scheduled_ns=_shift(rec.scheduled_ns, d),
        first_byte_ns=_shift(rec.first_byte_ns, d),
        first_content_ns=_shift(rec.first_content_ns, d),
        first_answer_ns=_shift(rec.first_answer_ns, d),
        send_start_ns=_shift(rec.send_start_ns, d),
        end_ns=rec.end_ns + d,
        chunk_ns=array("q", [x + d for x in rec.chunk_ns]),
    )


def _shift_lane(lane: LaneDelta, d: int) -> LaneDelta:
    return lane._replace(
        sent_ns=lane.sent_ns + d,
        first_content_ns=_shift(lane.first_content_ns, d),
        chunk_ns=_shift_stamps(lane.chunk_ns, d),
    )


def shift_batch(batch: Batch, delta_ns: int) -> Batch:
    """``batch`` with every stamp moved by ``delta_ns`` (durations, being differences, stay exact). Its
    session form, deflated in the node's clock, is dropped: the face encodes the moved batch instead."""
    if delta_ns == 0:
        return batch
    return batch._replace(
        t_ns=batch.t_ns + delta_ns,
        level_at_ns=_shift(batch.level_at_ns, delta_ns),
        lanes=[_shift_lane(x, delta_ns) for x in batch.lanes],
        records=[_shift_record(r, delta_ns) for r in batch.records],
        session=None,
    )


def rebase_message(raw: bytes, offset_ns: int) -> bytes:
    """A worker's pickled message in the face's clock (node time minus ``offset_ns``); with offset 0, or a
    message that is not a `Batch`, the same bytes."""
    if offset_ns == 0:
        return raw
    msg = pickle.loads(raw)
    if not isinstance(msg, Batch):
        return raw
    return pickle.dumps(shift_batch(msg, -offset_ns), protocol=pickle.HIGHEST_PROTOCOL)
