"""The whole wire between the face's `EngineHandle` and its engine worker processes: one typed value per
message, grouped by who sends it, so mypy checks both ends of each pipe.

Two one-way pipes per worker. The handle starts each worker with a `WorkerSpec` and then sends it commands
(`ApplyShare`, `Stop`); the worker sends back, every ``batch_interval_s``, one `Batch` of everything it
measured since the last (lane deltas, what arrived per level as mergeable counts, finished records), and
finally a `Goodbye` (or a `WorkerFailed` first, if it broke).

Cost: every worker sends about ten batches a second, each with a lane delta per live stream (hundreds at
high concurrency), so the values are NamedTuples (a tuple underneath) and a `Batch` pickles its lane deltas
and finished `RequestRecord`s as plain tuples (see `Batch.__reduce__`): each item would otherwise pickle
through a Python-level ``__reduce_ex__``. Both ends still see only the typed values
(``tests/perf/wire_cost.py`` measures the difference).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from itertools import starmap
from operator import itemgetter
from typing import Any, NamedTuple

from tui.engine.config import Arrival, EngineOptions, LoadMode, TargetConfig, WorkloadConfig
from tui.engine.records import RequestRecord, record_fields

__all__ = [
    "ApplyShare",
    "Arrivals",
    "Batch",
    "Command",
    "Goodbye",
    "Health",
    "LaneDelta",
    "SessionPiece",
    "Stop",
    "WorkerFailed",
    "WorkerLost",
    "WorkerMessage",
    "WorkerShare",
    "WorkerSpec",
]


# --- start-up (face -> worker, as the process's argument) ----------------------------------------


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker process is started with (it crosses once, pickled by ``spawn``)."""

    index: int
    """This worker's number, 0..workers-1 (request ids and the stagger grid depend on it)."""
    workers: int
    target: TargetConfig
    workload: WorkloadConfig
    model: str
    """The model name, already resolved by the handle (from ``/v1/models`` or the target)."""
    options: EngineOptions


@dataclass(frozen=True)
class WorkerShare:
    """One worker's part of the load target (`tui.engine.load.split.split_load` makes them)."""

    level_id: int
    mode: LoadMode = "concurrency"
    concurrency: int = 0
    rate: float = 0.0
    arrival: Arrival = "poisson"
    max_concurrency: int | None = None
    paused: bool = False
    phase_s: float = 0.0
    """Constant arrivals: this worker's offset, so W workers interleave evenly instead of firing together."""
    seed: int = 0
    speed: float = 1.0
    """Trace replay: the trace's gaps divided by this."""
    trace_anchor_ns: int | None = None
    """Trace replay: the moment (``perf_counter_ns``, one clock for every process) at which the replay is at
    ``trace_pos_ns`` of the trace; None: not started yet (the workers wait until all are up)."""
    trace_pos_ns: int = 0
    """Trace replay: nanoseconds into the trace (from its first request) at ``trace_anchor_ns``."""
    trace_epoch: int = 0
    """Trace replay: a new epoch starts the trace over, from ``trace_pos_ns``."""


# --- commands (face -> worker) ---------------------------------------------------------------------


class ApplyShare(NamedTuple):
    """Reconcile toward this share of the load (a new level when its ``level_id`` is new)."""

    share: WorkerShare


class Stop(NamedTuple):
    """Stop issuing; let in-flight requests finish up to ``timeout_s`` (``finish_in_flight``) or cancel
    them."""

    finish_in_flight: bool
    timeout_s: float


Command = ApplyShare | Stop


# --- reports (worker -> face) ----------------------------------------------------------------------


class Health(NamedTuple):
    """A worker's own timing health: event-loop lag p99 and the share of one core its process uses."""

    loop_lag_p99_ms: float
    cpu_share: float
    tasks: int = 0
    """Asyncio tasks alive in the worker (filled in the window readings only: counting walks every task), so
    a long run can show that none leak (`tests/perf/soak.py`)."""
    idle_lag_p99_ms: float | None = None
    """The loop lag p99 measured with no load at the worker's start (in its first window reading only): this
    machine's own noise, which the face's lag threshold is set from (`tui.engine.aggregate.saturation`)."""
    loop_lag_mean_ms: float | None = None
    """The window's mean loop lag (window readings only): how long an answer that ended waited to be read."""
    in_flight_mean: float | None = None
    """Requests the worker had in flight, averaged over the window's time (window readings only): a closed
    loop below its users sends late (`tui.engine.aggregate.saturation`)."""


class LaneDelta(NamedTuple):
    """What changed in one in-flight request's stream since its last delta.

    ``chunk_ns`` is the raw bytes of an ``array("q")``: the stamps of the content chunks that arrived since
    the last delta (never resent; ``b""`` in a finished request's last delta, whose record carries them all);
    ``chunk_tokens`` the same for the server's per-chunk token counts, or None from the first chunk that came
    without one (continuous usage off). A face thus sees a live request's chunk timeline, and no Python
    object per chunk crosses the pipe."""

    request_id: int
    level_id: int
    sent_ns: int
    """The latest send (a retry restamps it)."""
    text: str
    """Text streamed since the last delta."""
    tokens: int
    """Output tokens so far (one per chunk unless the server counts them)."""
    first_content_ns: int | None
    chunk_ns: bytes
    chunk_tokens: bytes | None
    reasoning: str = ""
    """Reasoning text (``reasoning_content``/``reasoning`` deltas) streamed since the last delta, kept apart
    from the answer in `text` so a face can draw it apart."""


class Arrivals(NamedTuple):
    """What arrived for one level since the worker's last batch, from every stream (finished or not), as
    counts that merge by adding: across batches, workers and machines (never an averaged percentile).

    Each field is the raw bytes of an int64 numpy array. Tokens are counted per `ARRIVAL_BUCKET_NS` bucket
    of `time.perf_counter_ns` (bucket ``k`` covers ``[k * ARRIVAL_BUCKET_NS, (k + 1) * ARRIVAL_BUCKET_NS)``);
    TTFTs (at each stream's first content chunk) and chunk gaps (at each later chunk) as counts per fine bin
    of `tui.engine.bins.FINE_EDGES_MS` (50 per decade from 0.01 ms)."""

    level_id: int
    token_buckets: bytes
    token_counts: bytes
    ttft_bins: bytes
    ttft_counts: bytes
    gap_bins: bytes
    gap_counts: bytes


class SessionPiece(NamedTuple):
    """A batch's session line from after its time on (the face writes the time), as raw deflate blocks that
    end on a sync flush, with the CRC-32 and length of the line they hold: the face appends them to the
    session's gzip stream as they are (`tui.engine.recording.file.SessionWriter.write_piece`)."""

    deflated: bytes
    crc: int
    size: int


ARRIVAL_BUCKET_NS = 10_000_000
"""Width of the token-arrival buckets an `Arrivals` carries (10 ms: well under the face's 100 ms buckets)."""


_lane_delta_from_tuple = partial(tuple.__new__, LaneDelta)
"""Rebuilds a `LaneDelta` from its plain tuple without a Python frame per item."""
_plain_tuple = itemgetter(slice(None))
"""A NamedTuple's fields as an exact tuple (a full slice: a C memcpy, twice as fast as ``tuple(x)``)."""


class Batch(NamedTuple):
    """Everything one worker measured since its previous batch."""

    worker: int
    t_ns: int
    """When the worker built the batch: it has reported everything before this."""
    level_id: int
    """The level the worker is applying."""
    level_at_ns: int | None = None
    """When that level is fully applied (its staggered new users have all started); None: at ``t_ns``."""
    in_flight: int = 0
    lanes: Sequence[LaneDelta] = ()
    tokens: int = 0
    """Output tokens received since the last batch (one per chunk unless the server counted)."""
    records: Sequence[RequestRecord] = ()
    """Requests that finished since the last batch."""
    health: Health | None = None
    """Rolling readings (lag p99 over the last 3 s, CPU over the last 2 s), for display and the maxima."""
    notices: Sequence[str] = ()
    """One-line warnings the worker raised (each at most once)."""
    health_window: Health | None = None
    """Once every ``health_window_s``: the readings over that window alone (what saturation is judged on)."""
    dropped: int = 0
    """Open-loop arrivals dropped since the last batch: due while the server's failures held the arrivals
    (`tui.engine.load.backoff.ArrivalGate`), never sent."""
    arrivals: Sequence[Arrivals] = ()
    """Per level, the tokens, TTFTs and chunk gaps that arrived since the last batch (in-flight streams
    included): what the face's rolling views and level figures are made of."""
    session: SessionPiece | None = None
    """This batch's session line, deflated by its worker (`tui.engine.recording.batch_line`) when the run
    records a session; None: the face encodes it, if it records."""

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickle the lane deltas and records as plain tuples (pickle's C fast path, no Python call per item)
        and rebuild them on load."""
        worker, t_ns, level_id, level_at_ns, in_flight, lanes, tokens, records, *rest = self
        lane_tuples = list(map(_plain_tuple, lanes))
        record_tuples = list(map(record_fields, records))
        head = (worker, t_ns, level_id, level_at_ns, in_flight)
        return (_batch_from_wire, (*head, lane_tuples, tokens, record_tuples, *rest))


def _batch_from_wire(
    worker: int,
    t_ns: int,
    level_id: int,
    level_at_ns: int | None,
    in_flight: int,
    lanes: list[tuple[Any, ...]],
    tokens: int,
    records: list[tuple[Any, ...]],
    health: Health | None,
    notices: Sequence[str],
    health_window: Health | None,
    dropped: int = 0,
    arrivals: Sequence[Arrivals] = (),
    session: SessionPiece | None = None,
) -> Batch:
    deltas = list(map(_lane_delta_from_tuple, lanes))
    recs = list(starmap(RequestRecord, records))
    return Batch(
        worker, t_ns, level_id, level_at_ns, in_flight, deltas, tokens, recs, health, notices, health_window,
        dropped, arrivals, session,
    )  # fmt: skip


class WorkerFailed(NamedTuple):
    """The worker broke (its last word before the pipe closes)."""

    message: str
    """One line: the exception's type and message."""


class Goodbye(NamedTuple):
    """The worker has sent its last batch and is exiting."""


class WorkerLost(NamedTuple):
    """Written by the face's own pool, never by a worker: the worker's node was lost at ``at_ns`` (face
    time), after every message of it that arrived; the worker's last word, like `Goodbye`."""

    node: str
    at_ns: int
    workers: tuple[int, ...]
    """Every worker lost with that node."""
    signal: str | None = None
    """A local worker killed by this signal ("SIGKILL"): no node was lost, the process was."""


WorkerMessage = Batch | WorkerFailed | Goodbye | WorkerLost
