"""The stepper: one asyncio task stepping the scheduler on the modelled clock, writing each step's tokens.

It asks the scheduler (`tui.sim.perf_model.Scheduler`) for a step, sleeps for the step's modelled duration
(divided by `time_scale`), then hands each token that step produced to its request. Step ends are kept on an
absolute timeline, so neither the event loop's timer granularity (about 1 ms) nor the time spent writing
accumulates into drift; when the process falls behind by more than `_MAX_LAG_S` it restarts the timeline
rather than bursting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tui.sim.generation import GenRequest
from tui.sim.perf_model import Scheduler
from tui.sim.prometheus import ServerMetrics

_MAX_LAG_S = 0.005
"""How far behind its timeline the stepper may fall and still catch up (absorbs timer granularity)."""


async def run_steps(
    scheduler: Scheduler[GenRequest],
    wake: asyncio.Event,
    time_scale: float,
    counters: dict[str, int],
    metrics: ServerMetrics,
    on_state: Callable[[], None] | None = None,
) -> None:
    """Step `scheduler` forever; wait on `wake` while it is idle; count generated tokens in `counters`.

    Into `metrics`: each request's first admission (queue time since arrival) and, once per step, the
    step's decode tokens as that many inter-token gaps of the time since the last step that emitted (vLLM
    observes ITL per engine iteration too). `on_state`, when given, is called after every planned step (the
    state log), so the running/waiting it sees is the state a scrape during that step would read."""
    loop = asyncio.get_running_loop()
    prev_end = loop.time()
    queue_time, itl = metrics.queue_time, metrics.itl
    prev_emit_ns = 0
    while True:
        step = scheduler.step()
        if on_state is not None:
            on_state()
        if step is None:
            prev_emit_ns = 0  # idle: nobody is between two tokens
            wake.clear()
            await wake.wait()
            prev_end = loop.time()
            continue
        if step.admitted:
            now_ns = time.perf_counter_ns()
            for req in step.admitted:
                if not req.admitted_ns:
                    req.admitted_ns = now_ns
                    queue_time.observe((now_ns - req.arrival_ns) / 1e9)
        # The next step runs (on the modelled GPU) while this process writes the last step's tokens, so
        # its end is reckoned from the last end, not from now. Only when writing fell more than
        # _MAX_LAG_S behind that timeline is it restarted from now: the process is the bottleneck then,
        # and catching up would burst.
        end = prev_end + step.duration_s / time_scale
        now = loop.time()
        if now - end > _MAX_LAG_S:
            end = now
        delay = end - now
        if metrics.gpu is not None:
            metrics.gpu.step(
                time.perf_counter_ns() + int(delay * 1e9),
                step.context_tokens,
                step.decode_tokens + step.prefill_tokens,
            )
        # Always yield, so arrivals and disconnects are seen even when the process is behind.
        await asyncio.sleep(delay if delay > 0 else 0)
        prev_end = end
        if step.emitted:
            emit_ns = time.perf_counter_ns()
            decoded = len(step.emitted) - step.prefilled
            if decoded and prev_emit_ns:
                itl.observe((emit_ns - prev_emit_ns) / 1e9, decoded)
            prev_emit_ns = emit_ns
        counters["generation_tokens"] += len(step.emitted)
        for req in step.emitted:
            req.on_token()
