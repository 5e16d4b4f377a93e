"""The face's ingest of 16 remote workers' batches, with every in-flight lane against the lane budget.

One batch per worker every 100 ms: 300 in-flight streams each (5 new chunk stamps per lane per batch) and
6 finished requests of 256 chunks. Without the budget every batch carries 300 lane deltas; with it each
worker sends its oldest ``lane_budget(64, 16) = 8`` plus the last deltas of the 6 that finished. Prints
the face's CPU per batch (unpickle + `Store.ingest`) and the share of one core at 16 workers x 10 Hz.

    python tests/perf/face_ingest_budget.py [--workers 16] [--streams 300] [--seconds 4]
"""

from __future__ import annotations

import argparse
import pickle
import time
from array import array

from tui.engine.aggregate.store import Store
from tui.engine.config import LoadTarget
from tui.engine.load.lane_budget import lane_budget
from tui.engine.records import RequestRecord
from tui.engine.wire import Batch, Health, LaneDelta

MS = 1_000_000


def _batches(workers: int, streams: int, budget: int | None, rounds: int) -> list[bytes]:
    out = []
    for r in range(rounds):
        t = (r + 1) * 100 * MS
        for w in range(workers):
            base = r * 6 * workers  # ids advance as requests finish
            live = [base + k * workers + w + 1 for k in range(streams)]
            shown = live if budget is None else live[:budget]
            lanes = [
                LaneDelta(rid, 1, t - 1000 * MS, "tok " * 5, 50, t - 900 * MS,
                          array("q", range(t - 50 * MS, t, 10 * MS)).tobytes(), None)
                for rid in shown
            ]  # fmt: skip
            recs = []
            for k in range(6):
                rid = live[0] + k * workers
                chunks = array("q", range(t - 2560 * MS, t, 10 * MS))
                sent = t - 2600 * MS
                recs.append(RequestRecord(rid, w, rid // workers, 1, sent, first_content_ns=chunks[0],
                                          end_ns=chunks[-1], chunk_ns=chunks, output_tokens=256))  # fmt: skip
                lanes.append(LaneDelta(rid, 1, t - 2600 * MS, "", 256, chunks[0], b"", None))
            batch = Batch(w, t, 1, 0, streams, lanes, 5 * len(live), recs, Health(0.2, 0.3))
            out.append(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL))
    return out


def _cost(raw: list[bytes], workers: int) -> float:
    st = Store(0, workers)
    st.begin_level(1, LoadTarget(concurrency=300 * workers), 0)
    start = time.process_time()
    for b in raw:
        st.ingest(pickle.loads(b))
    return (time.process_time() - start) / len(raw) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--streams", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=4.0)
    a = ap.parse_args()
    rounds = int(a.seconds * 10)
    budget = lane_budget(64, a.workers)
    for name, b in (("every lane", None), (f"lane budget {budget}", budget)):
        raw = _batches(a.workers, a.streams, b, rounds)
        ms = _cost(raw, a.workers)
        kib = sum(map(len, raw)) / len(raw) / 1024
        share = ms * a.workers * 10 / 1e3
        print(f"{name:>16}: {kib:6.1f} KiB/batch, {ms:5.2f} ms face CPU/batch, {share:5.1%} of a core "
              f"at {a.workers} workers x 10 Hz")  # fmt: skip


if __name__ == "__main__":
    main()
