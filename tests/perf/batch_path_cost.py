"""CPU per chunk of the worker's batch path (`Worker.batch`: lane deltas, arrivals, pickling) at N live
streams, with and without the arrivals, in one process: the part of the worker's per-chunk cost a batch
adds on top of the stream path (`tests/perf/transport_cost.py --variants engine` measures that one).

Each round appends ``--stamps`` chunks (with text and per-chunk token counts) to every stream, then builds
and pickles one batch, as ``Worker._batches`` does ten times a second. Rounds alternate between the two
forms so the machine's other load falls on both alike.

    python tests/perf/batch_path_cost.py [--streams 300] [--stamps 5] [--rounds 400]
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import time

from tui.engine.config import EngineOptions, TargetConfig, WorkloadConfig
from tui.engine.load.arrival_counts import LevelArrivals
from tui.engine.load.worker import Worker, _Lane
from tui.engine.records import RequestRecord
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.wire import Arrivals, WorkerSpec

T0 = 10**12


def _worker(streams: int) -> Worker:
    spec = WorkerSpec(
        0, 1, TargetConfig(base_url="http://127.0.0.1:1/v1"), WorkloadConfig(), "m", EngineOptions()
    )
    worker = Worker(spec, None, None)  # type: ignore[arg-type]  # no pipes: batches are built, not sent
    for rid in range(streams):
        record = RequestRecord(rid, 0, rid, 1, T0 + rid)
        worker.lanes[rid] = _Lane(record, StreamAccumulator(), worker.arrivals.level(1))
    return worker


def _feed(worker: Worker, stamps: int, t: int) -> None:
    for lane in worker.lanes.values():
        acc = lane.acc
        for k in range(stamps):
            acc.chunk_ns.append(t + k * 1_000_000 + lane.record.request_id)
            acc.chunk_tokens.append(1)
            acc.pending_text.append("tok ")
        acc.tokens += stamps


class _Silent(LevelArrivals):
    """Notes nothing: the batch path as it is without the arrivals."""

    def note(self, sent_ns: int, prev_ns: int | None, stamps: bytes, counts: bytes | None) -> None:
        return None


def _no_arrivals() -> tuple[Arrivals, ...]:
    return ()


async def _main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=300)
    ap.add_argument("--stamps", type=int, default=5, help="chunks per stream per batch (5: 50 tok/s)")
    ap.add_argument("--rounds", type=int, default=400)
    ns = ap.parse_args()
    with_arrivals, without = _worker(ns.streams), _worker(ns.streams)
    for lane in without.lanes.values():
        lane.arrivals = _Silent(1)
    without.arrivals.take = _no_arrivals  # type: ignore[method-assign]
    spent = {"with": 0.0, "without": 0.0}
    for r in range(ns.rounds):
        for name, worker in (("with", with_arrivals), ("without", without)):
            _feed(worker, ns.stamps, T0 + r * 100_000_000)
            c0 = time.process_time()
            pickle.dumps(worker.batch(), protocol=pickle.HIGHEST_PROTOCOL)
            spent[name] += time.process_time() - c0
    chunks = ns.rounds * ns.streams * ns.stamps
    per = {k: v / chunks * 1e6 for k, v in spent.items()}
    print(
        f"{ns.streams} streams x {ns.stamps} chunks per batch, {ns.rounds} rounds: batch path "
        f"{per['without']:.3f} us/chunk without arrivals, {per['with']:.3f} with "
        f"(+{per['with'] - per['without']:.3f} us per chunk)"
    )


def main() -> None:
    asyncio.run(_main())  # a worker is built inside its event loop


if __name__ == "__main__":
    main()
