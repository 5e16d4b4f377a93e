"""A node's clock offset from min-RTT round trips, the same-host rule, and the shift of a batch's stamps."""

from __future__ import annotations

import pickle
import random
from array import array

import pytest

from tui.engine.records import RequestRecord
from tui.engine.remote.clock import (
    estimate_offset,
    node_clock,
    offset_from_samples,
    rebase_message,
    shift_batch,
)
from tui.engine.wire import Batch, Goodbye, LaneDelta

MS = 1_000_000


def test_the_fastest_round_trip_wins_and_its_error_is_within_half_of_it() -> None:
    true_offset = 123 * MS
    samples: list[tuple[int, int, int]] = []
    for out_ns, back_ns in [(900_000, 100_000), (50_000, 60_000), (2 * MS, 2 * MS)]:
        t0 = 10 * MS * len(samples)
        node = t0 + out_ns + true_offset
        samples.append((t0, node, t0 + out_ns + back_ns))
    est = offset_from_samples(samples)
    assert est.rtt_ns == 110_000 and not est.same_host
    assert abs(est.offset_ns - true_offset) <= est.bound_ns == 55_000


@pytest.mark.parametrize("seed", range(5))
def test_estimates_over_jittery_asymmetric_links_stay_within_rtt_over_2(seed: int) -> None:
    """A scripted link: each leg 0.2-3 ms, legs independent (so asymmetric); the node's clock is off by a
    random offset of either sign. The error never exceeds the bound the estimate reports."""
    rng = random.Random(seed)
    offset = rng.randint(-(10**12), 10**12)
    face = [0]

    def face_ns() -> int:
        return face[0]

    def read_node() -> int:
        face[0] += rng.randint(200_000, 3 * MS)  # request leg
        reading = face[0] + offset
        face[0] += rng.randint(200_000, 3 * MS)  # reply leg
        return reading

    est = estimate_offset(read_node, face_ns, rounds=16)
    assert 0 < est.bound_ns <= est.rtt_ns
    assert abs(est.offset_ns - offset) <= est.rtt_ns / 2


def test_the_same_boot_id_is_the_same_clock_exactly_with_no_round_trip() -> None:
    def never() -> int:
        raise AssertionError("no round trip on the same host")

    est = node_clock("abc", never, never, own_boot_id="abc")
    assert est.same_host and est.offset_ns == 0 and est.bound_ns == 0
    other = node_clock("xyz", lambda: 5 * MS, lambda: 0, own_boot_id="abc")
    assert not other.same_host and other.offset_ns == 5 * MS
    # no boot id at all (not Linux): never taken for the same host
    assert not node_clock("", lambda: 0, lambda: 0, own_boot_id="").same_host


def _batch() -> Batch:
    chunks = array("q", [1_050 * MS, 1_060 * MS, 1_070 * MS])
    rec = RequestRecord(
        request_id=1, worker=0, seq=0, level_id=1, sent_ns=1_000 * MS, scheduled_ns=999 * MS,
        first_byte_ns=1_040 * MS, first_content_ns=chunks[0], end_ns=chunks[-1], chunk_ns=chunks,
        send_start_ns=999 * MS, first_answer_ns=chunks[0],
    )  # fmt: skip
    lane = LaneDelta(2, 1, 1_010 * MS, "hi", 2, 1_030 * MS, array("q", [1_030 * MS]).tobytes(), None)
    return Batch(worker=0, t_ns=1_100 * MS, level_id=1, level_at_ns=1_001 * MS, lanes=[lane], records=[rec])


def test_a_shifted_then_unshifted_batch_is_identical_and_durations_never_change() -> None:
    b = _batch()
    there = shift_batch(b, 7 * MS)
    assert there.t_ns == b.t_ns + 7 * MS and there.level_at_ns == 1_008 * MS
    r0, r1 = b.records[0], there.records[0]
    assert r1.sent_ns - r0.sent_ns == 7 * MS and list(r1.chunk_ns) == [x + 7 * MS for x in r0.chunk_ns]
    assert r1.ttft_ns == r0.ttft_ns and r1.e2e_ns == r0.e2e_ns
    lane = there.lanes[0]
    assert lane.sent_ns == 1_017 * MS and array("q", lane.chunk_ns).tolist() == [1_037 * MS]
    assert pickle.dumps(shift_batch(there, -7 * MS)) == pickle.dumps(b)


def test_rebase_passes_bytes_untouched_at_offset_zero_and_for_other_messages() -> None:
    raw = pickle.dumps(_batch())
    assert rebase_message(raw, 0) is raw
    bye = pickle.dumps(Goodbye())
    assert rebase_message(bye, 5 * MS) is bye
    moved: Batch = pickle.loads(rebase_message(raw, 5 * MS))
    assert moved.t_ns == _batch().t_ns - 5 * MS  # node time minus the offset: the face's


def test_a_shifted_batch_leaves_its_session_form_behind_for_the_face_to_encode() -> None:
    from tui.engine.wire import SessionPiece

    b = _batch()._replace(session=SessionPiece(b"\x03\x00", 0, 0))  # deflated in the node's clock
    assert shift_batch(b, 0).session == b.session
    assert shift_batch(b, 7 * MS).session is None
