"""What one worker batch costs on the wire: building its lane deltas, pickling it, unpickling it (and, for
the old form, rebuilding its records, which the store's ingest did).

A worker sends about ten batches a second, each with a lane delta per live stream. This compares the typed
`tui.engine.wire.Batch` with the untyped form it replaced (a dict of plain tuples, records as tuples).

    python tests/perf/wire_cost.py [--lanes 300] [--stamps 30] [--records 20]
"""

from __future__ import annotations

import argparse
import pickle
import timeit
from array import array
from collections.abc import Callable

from tui.engine.load.arrival_counts import ArrivalCollector
from tui.engine.records import RequestRecord, record_fields
from tui.engine.wire import Batch, Health, LaneDelta

T0 = 10**12


def _records(n: int) -> list[RequestRecord]:
    chunks = array("q", range(T0, T0 + 100))
    return [
        RequestRecord(i, 0, i, 1, T0, first_content_ns=T0 + 5, end_ns=T0 + 9, chunk_ns=chunks)
        for i in range(n)
    ]


def _load(data: bytes) -> object:
    """Unpickle, and for the untyped form also rebuild the records as the store did (`from_wire`)."""
    msg = pickle.loads(data)
    if isinstance(msg, dict):
        msg["records"] = [RequestRecord(*t) for t in msg["records"]]
    return msg


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lanes", type=int, default=300)
    ap.add_argument("--stamps", type=int, default=30)
    ap.add_argument("--records", type=int, default=20)
    args = ap.parse_args()
    stamps = array("q", range(T0, T0 + args.stamps)).tobytes()
    text = "tok " * args.stamps
    recs = _records(args.records)

    def typed() -> Batch:
        lanes = [LaneDelta(i, 1, T0 + i, text, 100 + i, T0, stamps, stamps) for i in range(args.lanes)]
        return Batch(0, T0, 1, T0, args.lanes, lanes, 3000, recs, Health(0.5, 0.3), [], None)

    def untyped() -> dict[str, object]:
        lanes = [(i, 1, T0 + i, text, 100 + i, T0, stamps, stamps) for i in range(args.lanes)]
        records = [record_fields(r) for r in recs]  # what to_wire() built
        return {"w": 0, "t": T0, "level": 1, "level_at": T0, "in_flight": args.lanes, "lanes": lanes,
                "tokens": 3000, "records": records, "health": (0.5, 0.3), "notices": []}  # fmt: skip

    def best_us(fn: Callable[[], object]) -> float:
        return min(timeit.repeat(fn, number=100, repeat=7)) / 100 * 1e6

    print(f"{args.lanes} lane deltas x {args.stamps} stamps, {args.records} records (best of 7, us)")
    for name, build in (("untyped dict", untyped), ("typed Batch", typed)):
        payload = build()
        data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        b = best_us(build)
        d = best_us(lambda payload=payload: pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))  # type: ignore[misc]
        loads = best_us(lambda data=data: _load(data))  # type: ignore[misc]
        print(f"  {name:13s} build {b:7.1f}  dumps {d:7.1f}  loads {loads:7.1f}  ({len(data)} bytes)")
    # the arrivals (tokens by time, TTFT and gap bins) a batch adds, built from the same stamps
    collector = ArrivalCollector()

    def arrivals() -> object:
        for i in range(args.lanes):
            collector.note(1, T0, T0 - 1000 + i if i % 10 else None, stamps, stamps)
        return collector.take()

    a = best_us(arrivals)
    data = pickle.dumps(arrivals(), protocol=pickle.HIGHEST_PROTOCOL)
    a_dumps = best_us(lambda: pickle.dumps(arrivals(), protocol=pickle.HIGHEST_PROTOCOL)) - a
    per_chunk = (a + max(a_dumps, 0.0)) / (args.lanes * args.stamps)
    print(
        f"  arrivals      build {a:7.1f}  dumps {a_dumps:7.1f}  ({len(data)} bytes): "
        f"{per_chunk:.3f} us per chunk"
    )


if __name__ == "__main__":
    main()
