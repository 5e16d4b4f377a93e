"""The face's CPU per streamed chunk: N workers' batches of S streams each through the face's ingest path.

The batches are built by the real `Worker.batch` (lane budget, arrivals, finished records and their last
lane deltas) from streams of ``--osl``-token answers at ``--tok-s`` tokens/s, one batch per worker every
100 ms, then pickled as a worker sends them. The face's side is then timed part by part in this one thread
(CPU time, not wall time): unpickling, `Store.ingest` (with the guard's look at the records, as
`EngineHandle._take` does), the session's `SessionRecorder.batch` (on by default; ``--record-text`` keeps
the text; the workers encode each batch's session form, timed apart, unless ``--face-encodes``), the
``--requests-log``, the views the reader refreshes every 100 ms of the run's time
(`Store.refresh_views`) and, apart, the fold of what ingest gathered for them. The snapshot and drawing
are the app's, counted apart. Prints the µs per chunk of each part and of the whole, and how many such
workers one face core keeps up with.

    python tests/perf/face_ingest.py --workers 4 --streams-per-worker 200 [--seconds 6] [--requests-log]
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import tempfile
import time
from pathlib import Path

from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.control.guard import ConfigGuard
from tui.engine.host.reader import RequestsLogFile
from tui.engine.host.run_core import new_store
from tui.engine.load.worker import Worker, _Lane
from tui.engine.recording.recorder import open_recorder
from tui.engine.records import RequestRecord
from tui.engine.stream.openai import StreamAccumulator
from tui.engine.wire import Batch, WorkerSpec

T0 = 10**12
MS = 1_000_000
BATCH_NS = 100 * MS


class _Streams:
    """One worker's ``streams`` closed-loop users, each streaming ``osl``-token answers."""

    def __init__(self, index: int, workers: int, streams: int, osl: int, options: EngineOptions) -> None:
        spec = WorkerSpec(
            index, workers, TargetConfig(base_url="http://127.0.0.1:1/v1"), WorkloadConfig(), "m", options
        )  # fmt: skip
        self.worker = Worker(spec, None, None)  # type: ignore[arg-type]  # no pipes: batches built, not sent
        self.worker.level_id = 1
        self.osl = osl
        self.encode_s = 0.0
        """CPU seconds this worker spent on its batches' session form."""
        self.left: dict[int, int] = {}
        for user in range(streams):  # staggered: answers end evenly over time, not in waves
            self._issue(T0 - BATCH_NS, 1 + user * osl // streams)

    def _issue(self, t_ns: int, left: int) -> None:
        w = self.worker
        seq = w.seq
        w.seq += 1
        rid = seq * w.workers + w.index + 1
        rec = RequestRecord(rid, w.index, seq, 1, t_ns, first_byte_ns=t_ns + 20 * MS, input_tokens=200)
        w.lanes[rid] = _Lane(rec, StreamAccumulator(), w.arrivals.level(1))
        self.left[rid] = left

    def round(self, t_ns: int, per_batch: int) -> bytes:
        """Every stream gets ``per_batch`` chunks in the 100 ms before ``t_ns``; the ended ones finish as
        `Worker.issue` finishes them and their users send the next request; then one pickled batch."""
        w = self.worker
        step = BATCH_NS // per_batch
        for rid, lane in list(w.lanes.items()):
            acc = lane.acc
            n = min(per_batch, self.left[rid])
            for k in range(n):
                acc.chunk_ns.append(t_ns - BATCH_NS + k * step + rid % step)
                acc.chunk_tokens.append(1)
                acc.pending_text.append(" tok")
            acc.tokens += n
            self.left[rid] -= n
            if self.left[rid] == 0:
                rec = lane.record
                rec.chunk_ns, rec.chunk_tokens = acc.chunk_ns, acc.chunk_tokens
                rec.first_content_ns = rec.first_answer_ns = acc.chunk_ns[0]
                rec.end_ns = acc.chunk_ns[-1] + 1000
                rec.output_tokens, rec.output_source = acc.tokens, "usage"
                rec.input_source, rec.finish_reason = "usage", "length"
                del w.lanes[rid], self.left[rid]
                delta = w._lane_delta(lane, final=True)
                if delta is not None:
                    w.finished_lanes.append(delta)
                w.finished.append(rec)
                self._issue(rec.end_ns, self.osl)
        enc, w.session_enc = w.session_enc, None  # encoded below, at the batch's run time
        batch = w.batch()._replace(t_ns=t_ns)
        w.session_enc = enc
        if enc is not None:
            c0 = time.thread_time()
            batch = w.session_form(batch)
            self.encode_s += time.thread_time() - c0
        return pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)


async def _batches(
    workers: int, streams: int, osl: int, per_batch: int, rounds: int, options: EngineOptions
) -> tuple[list[bytes], float]:
    """The pickled batches, and the CPU seconds the workers spent on their session form."""
    gens = [_Streams(i, workers, streams, osl, options) for i in range(workers)]
    raw = [g.round(T0 + (r + 1) * BATCH_NS, per_batch) for r in range(rounds) for g in gens]
    return raw, sum(g.encode_s for g in gens)


class _Clock:
    """CPU seconds of this thread, per part."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}
        self._at = time.thread_time()

    def lap(self, name: str) -> None:
        """Charge the time since the last lap to ``name``."""
        now = time.thread_time()
        self.parts[name] = self.parts.get(name, 0.0) + now - self._at
        self._at = now


def _options(ns: argparse.Namespace, folder: Path) -> EngineOptions:
    """The run's options (its workers' too): a session in ``folder`` unless ``--no-record``."""
    return EngineOptions(
        record=None if ns.no_record else str(folder / "s.tokentop"), record_text=ns.record_text
    )


def _face(
    raw: list[bytes], workers: int, ns: argparse.Namespace, folder: Path
) -> tuple[dict[str, float], int]:
    """Feed ``raw`` (round after round, worker after worker) through the face; CPU seconds per part and the
    chunks the batches carried."""
    options = _options(ns, folder)
    store = new_store(options, T0, workers)
    load = LoadTarget(concurrency=workers * ns.streams_per_worker)
    session, _ = open_recorder(
        options, target=TargetConfig(base_url="http://127.0.0.1:1/v1"), workload=WorkloadConfig(),
        load=load, workers=workers, t0_ns=T0, started_at_s=time.time(),
    )  # fmt: skip
    if session is not None:
        store.on_views = session.views
        session.level("begin", T0, 1, load)
    store.begin_level(1, load, T0)
    log = RequestsLogFile(folder / "requests.jsonl") if ns.requests_log else None
    guard = ConfigGuard(has_key=False)
    chunks = 0
    clock = _Clock()
    for i, b in enumerate(raw):
        batch: Batch = pickle.loads(b)
        clock.lap("unpickle")
        chunks += batch.tokens
        if session is not None:
            session.batch(batch)
            clock.lap("session")
        recs = store.ingest(batch)
        guard.see(recs)
        clock.lap("ingest")
        if log is not None:
            log.write(recs)
            clock.lap("requests log")
        if (i + 1) % workers == 0:  # the reader refreshes the views at least every 100 ms
            now = T0 + (i + 1) // workers * BATCH_NS
            if hasattr(store, "fold") and store._views.due(now):  # what ingest gathered, folded apart
                store.fold()
                clock.lap("fold")
            store.refresh_views(now)
            clock.lap("views")
    if session is not None:
        session.finish(None, lambda: {})
    if log is not None:
        log.close()
    return clock.parts, chunks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--streams-per-worker", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=6.0, help="run time the batches cover")
    ap.add_argument("--osl", type=int, default=100, help="tokens per answer (one chunk each)")
    ap.add_argument("--tok-s", type=int, default=50, help="tokens per second per stream")
    ap.add_argument("--no-record", action="store_true", help="no session (as --no-record)")
    ap.add_argument("--record-text", action="store_true", help="the session keeps the text")
    ap.add_argument("--requests-log", action="store_true", help="write the requests log too")
    ap.add_argument("--face-encodes", action="store_true",
                    help="the workers ship no session form: the face encodes each batch")  # fmt: skip
    ns = ap.parse_args()
    per_batch = max(1, ns.tok_s // 10)
    rounds = int(ns.seconds * 10)
    c0 = time.process_time()
    worker_options = _options(ns, Path("unused"))  # a worker only asks whether the run records
    if ns.face_encodes:
        worker_options = EngineOptions()
    raw, encode_s = asyncio.run(
        _batches(ns.workers, ns.streams_per_worker, ns.osl, per_batch, rounds, worker_options)
    )
    built = time.process_time() - c0
    with tempfile.TemporaryDirectory() as tmp:
        for run in ("warm", "timed"):
            (Path(tmp) / run).mkdir()
        _face(raw[: 10 * ns.workers], ns.workers, ns, Path(tmp) / "warm")  # lazy imports, first allocations
        parts, chunks = _face(raw, ns.workers, ns, Path(tmp) / "timed")
    total = sum(parts.values())
    kib = sum(map(len, raw)) / len(raw) / 1024
    print(f"{ns.workers} workers x {ns.streams_per_worker} streams, {ns.tok_s} tok/s, {ns.osl}-token answers,"
          f" {ns.seconds:g} s: {chunks:,} chunks in {len(raw)} batches ({kib:.1f} KiB each; built in "
          f"{built:.1f} s)")  # fmt: skip
    for name, spent in (*parts.items(), ("face total", total)):
        print(f"  {name:>12}: {spent / chunks * 1e6:6.3f} us/chunk  ({spent:6.3f} s CPU)")
    if encode_s:
        print(f"  (the workers' session form: {encode_s / chunks * 1e6:.3f} us/chunk, on the workers)")
    share = total / ns.seconds  # of one core, at these workers' rate
    print(f"face CPU {share:.1%} of a core at {ns.workers} workers: one face core keeps up with about "
          f"{ns.workers / share:.0f} such workers")  # fmt: skip


if __name__ == "__main__":
    main()
