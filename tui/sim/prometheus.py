"""The simulator's `/metrics`: vLLM's Prometheus names, true to the scheduler's state.

What a real vLLM exposes (names and bucket edges from `vllm/v1/metrics/loggers.py`), so the face's scraper
meets the same text here as on a real server and the tests can hold its figures to the simulator's record:

| metric | kind | source here |
| --- | --- | --- |
| `vllm:num_requests_running` | gauge | sequences holding a slot (`Scheduler.running`) |
| `vllm:num_requests_waiting` | gauge | sequences queued (`Scheduler.num_waiting`) |
| `vllm:kv_cache_usage_perc` | gauge | KV tokens held / the profile's budget, 0..1 |
| `vllm:num_preemptions_total` | counter | recompute preemptions when the KV cache ran out |
| `vllm:prompt_tokens_total` | counter | prompt tokens of admitted requests |
| `vllm:generation_tokens_total` | counter | tokens produced by engine steps |
| `vllm:prefix_cache_queries_total` | counter | prompt tokens looked up in the prefix cache (when it is on) |
| `vllm:prefix_cache_hits_total` | counter | of those, the tokens it served (`tui.sim.prefix_cache`) |
| `vllm:request_success_total` | counter | requests finished, by `finished_reason` (stop, length) |
| `vllm:time_to_first_token_seconds` | histogram | arrival -> first token written, observed then |
| `vllm:inter_token_latency_seconds` | histogram | engine-step gaps of decoding sequences, per step |
| `vllm:request_queue_time_seconds` | histogram | arrival -> first admission, observed at admission |
| `vllm:e2e_request_latency_seconds` | histogram | arrival -> end, observed at the end |
| `vllm:request_prefill_time_seconds` | histogram | first admission -> first token, observed then |
| `vllm:request_decode_time_seconds` | histogram | first token -> end, observed at the end |
| `vllm:request_inference_time_seconds` | histogram | first admission -> end, observed at the end |

So per request queue + prefill is the TTFT exactly, as on vLLM (its TTFT also holds the front end's
tokenising, which the simulator does not model).

Cost: an observation is one `bisect` and two additions; the text is rendered only when scraped (about once
a second), never per chunk. ITL is observed as vLLM does, per engine step: every sequence that decoded a
token in a step waited one step interval (the time since the last step that emitted), so one weighted
observation per step counts them all and the per-chunk hot path (`GenRequest.on_token`) gains nothing.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tui.sim.dcgm import GpuModel

TTFT_EDGES_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
"""vLLM's `vllm:time_to_first_token_seconds` bucket edges."""
ITL_EDGES_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
"""vLLM's `vllm:inter_token_latency_seconds` bucket edges."""
REQUEST_LATENCY_EDGES_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
)  # fmt: skip
"""vLLM's request latency edges (`vllm:e2e_request_latency_seconds`, `vllm:request_queue_time_seconds`)."""


class Histogram:
    """A Prometheus histogram: fixed upper edges (`le`), a count per bucket plus +Inf, a sum and a count."""

    __slots__ = ("counts", "edges", "sum")

    def __init__(self, edges: Sequence[float]) -> None:
        self.edges = tuple(edges)
        self.counts = [0] * (len(self.edges) + 1)
        """Per bucket, not cumulative; the last is the +Inf bucket."""
        self.sum = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        """Count `n` observations of `value` into the first bucket whose edge is >= it (Prometheus' `le`)."""
        self.counts[bisect_left(self.edges, value)] += n
        self.sum += value * n

    def render(self, name: str, labels: str) -> str:
        """The `_bucket`/`_sum`/`_count` lines, cumulative as the text format wants."""
        lines = [f"# TYPE {name} histogram\n"]
        total = 0
        for edge, count in zip(self.edges, self.counts, strict=False):
            total += count
            lines.append(f'{name}_bucket{{{labels},le="{edge}"}} {total}\n')
        total += self.counts[-1]
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {total}\n')
        lines.append(f"{name}_sum{{{labels}}} {self.sum!r}\n")
        lines.append(f"{name}_count{{{labels}}} {total}\n")
        return "".join(lines)


class SchedulerState(Protocol):
    """What the gauges read from the scheduler (`tui.sim.perf_model.Scheduler`)."""

    @property
    def num_waiting(self) -> int: ...
    @property
    def kv_usage(self) -> float: ...

    preemptions: int


class ServerMetrics:
    """The histograms and finish counts the simulator keeps for `/metrics`; one per server."""

    def __init__(self) -> None:
        self.ttft = Histogram(TTFT_EDGES_S)
        self.itl = Histogram(ITL_EDGES_S)
        self.queue_time = Histogram(REQUEST_LATENCY_EDGES_S)
        self.e2e = Histogram(REQUEST_LATENCY_EDGES_S)
        self.prefill = Histogram(REQUEST_LATENCY_EDGES_S)
        self.decode = Histogram(REQUEST_LATENCY_EDGES_S)
        self.inference = Histogram(REQUEST_LATENCY_EDGES_S)
        self.success: dict[str, int] = {"stop": 0, "length": 0}
        self.gpu: GpuModel | None = None
        """The simulated GPU's DCGM figures, served beside vLLM's names (None: a CPU profile)."""
        self.started_s = round(time.time(), 2)
        """``process_start_time_seconds``, as vLLM serves it (prometheus_client's process collector)."""

    def first_token(self, arrival_ns: int, admitted_ns: int, first_ns: int) -> None:
        """A request's first token: its TTFT and its prefill (from its first admission)."""
        self.ttft.observe((first_ns - arrival_ns) / 1e9)
        if admitted_ns:
            self.prefill.observe((first_ns - admitted_ns) / 1e9)

    def finished_ok(
        self, arrival_ns: int, end_ns: int, finish_reason: str, admitted_ns: int = 0, first_ns: int = 0
    ) -> None:
        """A request ended well: its E2E, decode and inference times and its finish reason."""
        self.e2e.observe((end_ns - arrival_ns) / 1e9)
        if first_ns:
            self.decode.observe((end_ns - first_ns) / 1e9)
        if admitted_ns:
            self.inference.observe((end_ns - admitted_ns) / 1e9)
        self.success[finish_reason] = self.success.get(finish_reason, 0) + 1

    def render(
        self,
        model: str,
        running: int,
        sched: SchedulerState,
        prompt_tokens: int,
        generation_tokens: int,
        prefix: tuple[int, int] | None = None,
    ) -> bytes:
        """The whole exposition text, in the order vLLM writes it (gauges, counters, histograms);
        ``prefix``: the prefix cache's (queries, hits) in tokens, None without one."""
        labels = f'model_name="{model}"'
        rows: tuple[tuple[str, str, float], ...] = (
            ("gauge", "vllm:num_requests_running", running),
            ("gauge", "vllm:num_requests_waiting", sched.num_waiting),
            ("gauge", "vllm:kv_cache_usage_perc", round(sched.kv_usage, 6)),
            ("counter", "vllm:num_preemptions_total", sched.preemptions),
            ("counter", "vllm:prompt_tokens_total", prompt_tokens),
            ("counter", "vllm:generation_tokens_total", generation_tokens),
        )
        if prefix is not None:
            rows += (
                ("counter", "vllm:prefix_cache_queries_total", prefix[0]),
                ("counter", "vllm:prefix_cache_hits_total", prefix[1]),
            )
        parts = [f"# TYPE {name} {kind}\n{name}{{{labels}}} {value}\n" for kind, name, value in rows]
        parts.append("# TYPE vllm:request_success_total counter\n")
        parts += [
            f'vllm:request_success_total{{finished_reason="{reason}",{labels}}} {count}\n'
            for reason, count in self.success.items()
        ]
        parts.append(self.ttft.render("vllm:time_to_first_token_seconds", labels))
        parts.append(self.itl.render("vllm:inter_token_latency_seconds", labels))
        parts.append(self.queue_time.render("vllm:request_queue_time_seconds", labels))
        parts.append(self.e2e.render("vllm:e2e_request_latency_seconds", labels))
        parts.append(self.prefill.render("vllm:request_prefill_time_seconds", labels))
        parts.append(self.decode.render("vllm:request_decode_time_seconds", labels))
        parts.append(self.inference.render("vllm:request_inference_time_seconds", labels))
        if self.gpu is not None:
            parts.append(self.gpu.render(time.perf_counter_ns(), model))
        parts.append(
            f"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {self.started_s}\n"
        )
        return "".join(parts).encode()
