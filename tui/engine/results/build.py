"""The results document from plain data: a `RunInfo`, a `Snapshot`, the level views, a `ClientSummary` and
the server's figures; never the live engine, so results can be rebuilt from a file or a replay.

Never contains the API key or a header value: `RunInfo` holds none.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tui import __version__
from tui.engine.aggregate.attainment import capacity_level
from tui.engine.aggregate.cost import input_tokens_per_s, joules_per_token, tokens_per_joule, usd_per_mtok
from tui.engine.aggregate.levels import MIN_STEADY_REQUESTS, MIN_WINDOW_S
from tui.engine.aggregate.metrics import KNEE_RULE, KNEE_TOLERANCE
from tui.engine.config import EngineOptions, LoadTarget, WorkloadConfig
from tui.engine.redact import display_url
from tui.engine.results import model as rm
from tui.engine.results.capacity import CapacityAtSlo
from tui.engine.results.cost import CostAtSlo
from tui.engine.results.definitions import DEFINITIONS
from tui.engine.results.level_server import level_server
from tui.engine.results.population import population
from tui.engine.results.repeat import RepeatSet
from tui.engine.snapshot import Knee, LevelView, RampVerdict, SloView, Snapshot
from tui.engine.snapshot import Stats as ViewStats


def safe_url(url: str) -> str:
    """The URL without any user:password part or query value (`tui.engine.redact.display_url`)."""
    return display_url(url)


REDIRECTS = "not followed for a stream (a 3xx is a not_sse failure naming its Location)"


@dataclass(frozen=True)
class RunInfo:
    """What the results say about the run itself, as plain data: no engine object and no secret (the URL
    has no credentials, the headers only their names, the API key is not here at all). Made by
    `tui.engine.host.config_record.run_info` from the configs a face ran with."""

    url: str
    """Server base URL, without any user:password part."""
    model: str
    endpoint: str
    workload: WorkloadConfig
    options: EngineOptions
    workers: int
    load: LoadTarget
    """The target when the results were taken (a rate level's arrival process and cap come from it)."""
    started_at_s: float
    """Wall-clock start of the run (``time.time()``)."""
    timeout_s: float
    header_names: tuple[str, ...] = ()
    extra_body: tuple[tuple[str, object], ...] = ()
    demo: bool = False
    endpoint_path: str | None = None
    """``--endpoint /PATH`` without query values or key; None: the flavour's own path."""
    workload_record: rm.Workload | None = None
    """Every workload setting as plain data (`config_record.workload_record`)."""
    isl_probe: rm.IslProbe | None = None
    """Whether the ISL probe ran, or why not (`config_record.isl_probe_record`)."""
    stream_transport: str | None = None
    """What carried the workers' streams (`tui.engine.stream.transport.stream_transport`)."""
    stream_transport_note: str | None = None
    """Why that is not the transport asked for (a proxy), or None."""
    tool: str = "tokentop"
    version: str = __version__


@dataclass(frozen=True)
class ClientSummary:
    """The load generator's own health over the whole run."""

    max_loop_lag_p99_ms: float
    """Highest event-loop lag p99 any worker reported: raw, a momentary stall included."""
    max_cpu_share: float
    """Highest CPU share (of one core) any worker reported: raw."""
    saturated: bool
    """Sustained saturation at some point (`tui.engine.aggregate.saturation.Sustain`)."""
    saturated_spans_s: tuple[tuple[float | None, float | None], ...] = ()
    """[from, to] run seconds while flagged (to None: until the end)."""
    notices: tuple[str, ...] = ()
    lag_threshold_ms: float | None = None
    """The live flag's lag threshold in effect (from this machine unless fixed)."""


@dataclass(frozen=True)
class ServerSummary:
    """The server's own view for results: each level's figures over its window
    (`tui.engine.server_metrics.view.ServerView.level_summary`) and the run's (url, kind, status, message)."""

    run: Mapping[str, Any]
    levels: Mapping[int, Mapping[str, Any]]


@dataclass(frozen=True)
class LevelExtras:
    """What a level's view does not hold: counts and peaks the live store keeps beside it."""

    cancelled: int = 0
    max_loop_lag_p99_ms: float = 0.0
    max_cpu_share: float = 0.0
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: int | None = None
    histograms: rm.Histograms | None = None
    between_scrapes_ttft: tuple[float, int] | None = None
    """The client's mean TTFT (ms) and count over the requests whose first token landed between the two
    scrapes the level's server TTFT parts are taken between: the same population as the server's."""


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def stats_of(s: ViewStats) -> rm.Stats:
    """A view's statistics as the results write them (median is p50; NaN is None)."""
    return rm.Stats(
        mean=_num(s.mean), median=_num(s.p50), std=_num(s.std), p50=_num(s.p50), p90=_num(s.p90),
        p95=_num(s.p95), p99=_num(s.p99), min=_num(s.min), max=_num(s.max),
    )  # fmt: skip


def histograms_of(raw: Mapping[str, Mapping[str, Any]]) -> rm.Histograms:
    """`tui.engine.aggregate.level_histograms`'s dict (ttft, e2el, itl: edges_ms, counts) as the model's."""

    def one(name: str) -> rm.Histogram:
        h = raw.get(name) or {}
        return rm.Histogram(
            edges_ms=tuple(float(e) for e in h.get("edges_ms", ())), counts=tuple(h.get("counts", ()))
        )

    return rm.Histograms(ttft=one("ttft"), e2el=one("e2el"), itl=one("itl"))


def level_of(
    lv: LevelView,
    extra: LevelExtras,
    load: LoadTarget,
    server: ServerSummary | None,
    cost_per_hour: float | None = None,
) -> rm.Level:
    """One level in vLLM's vocabulary (plus tokentop's keys); ``cost_per_hour``: its prices (USD)."""
    rate, trace = lv.mode == "rate", lv.mode == "trace"
    figures = None if server is None else _with_client_ttft(server.levels.get(lv.level_id), lv, extra)
    ev = lv.client_evidence
    return rm.Level(
        level_id=lv.level_id,
        mode=lv.mode,
        concurrency=int(lv.value) if lv.mode == "concurrency" else None,
        request_rate=lv.value if rate else None,
        trace_speed=lv.value if trace else None,
        arrival=load.arrival if rate else None,
        max_concurrency=load.max_concurrency if rate or trace else None,
        duration=lv.window_s,
        completed=lv.window_completed,
        failed=lv.window_failed,
        total_input_tokens=lv.input_tokens,
        total_output_tokens=lv.output_tokens,
        request_throughput=_num(lv.request_per_s),
        output_throughput=_num(lv.output_tps),
        total_token_throughput=_num(lv.total_tps),
        request_goodput=_num(lv.goodput_per_s),
        slo=None if lv.slo is None else slo_of(lv.slo, cost_per_hour),
        usd_per_mtok_output=usd_per_mtok(cost_per_hour, _num(lv.output_tps)),
        usd_per_mtok_input=usd_per_mtok(cost_per_hour, input_tokens_per_s(lv.input_tokens, lv.window_s)),
        ttft=stats_of(lv.ttft),
        tpot=stats_of(lv.tpot),
        itl=stats_of(lv.itl_chunk),
        e2el=stats_of(lv.e2el),
        itl_e2e=stats_of(lv.itl_e2e),
        tokens_per_chunk=_num(lv.tokens_per_chunk),
        per_request_output_throughput=_num(lv.per_request_tps),
        steady=lv.steady,
        too_short=lv.too_short,
        steady_from_s=lv.steady_from_s,
        window_from_s=lv.window_from_s,
        window_to_s=lv.window_to_s,
        started_s=lv.started_s,
        ended_s=lv.ended_s,
        level_completed=lv.completed,
        level_failed=lv.failed,
        cancelled=extra.cancelled,
        errors=dict(lv.errors),
        exact_stats=lv.exact,
        client=rm.LevelClient(
            max_loop_lag_p99_ms=extra.max_loop_lag_p99_ms,
            max_cpu_share=extra.max_cpu_share,
            timing_bound_ms=_num(lv.client_lag_ms),
            timing_uncertain=lv.timing_uncertain,
            limited_by=ev.limited_by if ev is not None and ev.limited_by else None,
            mean_in_flight=_num(ev.in_flight) if ev is not None else None,
            send_shortfall=_num(ev.send_shortfall) if ev is not None else None,
        ),
        sched_lag=stats_of(lv.sched_lag) if rate or trace else None,
        dropped_arrivals=lv.dropped,
        server_down_s=lv.down_s,
        mean_input_tokens=_num(lv.mean_isl),
        mean_output_tokens=_num(lv.mean_osl),
        mean_reasoning_tokens=_num(lv.reasoning_tokens),
        ttfa=stats_of(lv.ttfa),
        cached_prompt_tokens=lv.cached_tokens,
        prefix_cache_hit_rate=_num(lv.cache_hit_rate),
        warm_cache=lv.warm_cache,
        client_saturated=lv.client_limited,
        coalesced_chunk_gaps=lv.coalesced_gaps,
        max_output_tokens_per_s=extra.max_output_tokens_per_s,
        max_concurrent_requests=extra.max_concurrent_requests,
        server=None if server is None else level_server(_with_energy(figures, lv)),
        scraped=server is not None,
        histograms=extra.histograms,
        measured_over=lv.measured_over,
        in_flight_at_end=lv.in_flight_at_end,
        partial_output_tokens=lv.partial_output_tokens,
        population=population(lv),
    )


def _any_slo(o: EngineOptions) -> bool:
    return any(x is not None for x in (o.slo_ttft_ms, o.slo_tpot_ms, o.slo_e2e_ms))


def slo_of(s: SloView, cost_per_hour: float | None = None) -> rm.LevelSlo:
    return rm.LevelSlo(
        attainment=_num(s.attainment),
        attainment_low=s.low,
        attainment_high=s.high,
        met=s.met,
        requests=s.requests,
        cut=s.cut,
        request_goodput=_num(s.goodput_rps),
        output_goodput=_num(s.goodput_tps),
        usd_per_mtok_goodput=usd_per_mtok(cost_per_hour, _num(s.goodput_tps)),
    )


def _plain(figures: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if figures is None else dict(figures)


def _with_client_ttft(
    figures: Mapping[str, Any] | None, lv: LevelView, extra: LevelExtras
) -> dict[str, Any] | None:
    """A level's server figures with its TTFT parts completed by the client's mean TTFT (the network and
    client part is the client's whole minus the server's): over the requests whose first token landed
    between the parts' scrapes when known, else over the level's window (then a bound: `with_client`)."""
    out = _plain(figures)
    if out is None or out.get("ttft_parts") is None:
        return out
    from tui.engine.server_metrics.parts import with_client

    if extra.between_scrapes_ttft is not None:
        mean, count = extra.between_scrapes_ttft
        out["ttft_parts"] = with_client(out["ttft_parts"], mean, count)
    else:
        out["ttft_parts"] = with_client(out["ttft_parts"], _num(lv.ttft.mean))
    return out


def _with_energy(figures: dict[str, Any] | None, lv: LevelView) -> dict[str, Any] | None:
    """A level's server figures with its GPU energy per output token (`tui.engine.aggregate.cost`): the
    energy counter's increase over the seconds between its readings, over the level's output tokens/s."""
    gpu = (figures or {}).get("gpu") or {}
    if figures is None or gpu.get("energy_j") is None:
        return figures
    energy, span, tps = gpu["energy_j"], gpu.get("energy_s"), _num(lv.output_tps)
    per_token = {
        "joules_per_output_token": joules_per_token(energy, span, tps),
        "output_tokens_per_joule": tokens_per_joule(energy, span, tps),
    }
    return {**figures, "gpu": {**gpu, **per_token}}


def capacity_at_slo(
    views: Sequence[LevelView], levels: Sequence[rm.Level], options: EngineOptions
) -> CapacityAtSlo | None:
    """With an SLO: the highest load whose attainment's lower bound met the target, and its saved goodput."""
    if not _any_slo(options):
        return None
    best = capacity_level(views, options.slo_target)
    if best is None:
        return CapacityAtSlo(level_id=None)
    slo = next(lv for lv in levels if lv.level_id == best.level_id).slo
    return CapacityAtSlo(
        level_id=best.level_id,
        mode=best.mode,
        value=best.value,
        output_goodput=None if slo is None else slo.output_goodput,
        request_goodput=None if slo is None else slo.request_goodput,
    )


def cost_at_slo(
    views: Sequence[LevelView], levels: Sequence[rm.Level], options: EngineOptions
) -> CostAtSlo | None:
    """With a price and an SLO: the capacity level's price of a million output tokens that met the SLO."""
    if options.cost_per_hour is None or not _any_slo(options):
        return None
    best = capacity_level(views, options.slo_target)
    if best is None:
        return CostAtSlo(level_id=None)
    level = next(lv for lv in levels if lv.level_id == best.level_id)
    usd = None if level.slo is None else level.slo.usd_per_mtok_goodput
    return CostAtSlo(level_id=best.level_id, value=best.value, usd_per_mtok_goodput=usd)


def knee_of(knee: Knee | None) -> rm.Knee | None:
    """A snapshot's knee as the results write it."""
    if knee is None:
        return None
    return rm.Knee(
        level_id=knee.level_id,
        value=knee.value,
        output_throughput=knee.output_tps,
        peak_output_throughput=knee.peak_tps,
    )


def ramp_of(verdict: RampVerdict) -> rm.Ramp:
    """The ramp's verdict as the results write it: the figures it quoted, unchanged."""
    return rm.Ramp(
        stopped_by=verdict.stopped_by,
        reason=verdict.reason,
        mode=verdict.mode,
        level_ids=verdict.level_ids,
        stopped_at_level_id=verdict.stopped_at_level_id,
        knee=knee_of(verdict.knee),
        peak_output_throughput=verdict.peak_tps,
        peak_level_id=verdict.peak_level_id,
        settled=verdict.settled,
        capacity_at_slo=verdict.capacity_value,
        capacity_level_id=verdict.capacity_level_id,
        capacity_output_goodput=_num(verdict.capacity_goodput_tps),
    )


def build_results(
    info: RunInfo,
    snap: Snapshot,
    views: Sequence[tuple[LevelView, LevelExtras]],
    client: ClientSummary,
    *,
    interrupted: str | None = None,
    server: ServerSummary | None = None,
    clock: rm.Clock | None = None,
    ramp: RampVerdict | None = None,
    resets: Mapping[int, rm.CacheReset] | None = None,
) -> rm.Results:
    """The whole results document for what was measured so far. ``interrupted``: why the run was cut short
    ("quit", "SIGINT", ...), as the face that saw it says; None for a run that finished. ``server``: what the
    server's own /metrics said, per level and overall (None: not scraped). ``resets``: the prefix cache
    resets asked for, by the level each came before."""
    workload, options, load = info.workload, info.options, info.load
    knee = snap.knee
    resets = resets or {}
    levels = tuple(
        replace(level_of(lv, extra, load, server, options.cost_per_hour), cache_reset=resets.get(lv.level_id))
        for lv, extra in views
    )
    outputs = info.endpoint != "embeddings"
    if not outputs:  # an embedding has no output: its output figures are not 0 but undefined
        knee = None
        levels = tuple(
            replace(lv, output_throughput=None, mean_output_tokens=None, max_output_tokens_per_s=None)
            for lv in levels
        )
    server_views = [
        lv
        for lv, _ in views
        if outputs and lv.steady and math.isfinite(lv.output_tps) and not lv.client_limited
    ]
    peak = max((lv.output_tps for lv in server_views), default=None)  # the knee's levels: the server's
    health = snap.health
    return rm.Results(
        tool=info.tool,
        version=info.version,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(info.started_at_s)),
        interrupted=interrupted is not None,
        interrupted_by=interrupted,
        repeat=None
        if options.repeat_of is None
        else RepeatSet(set_id=options.repeat_of[0], run=options.repeat_of[1], runs=options.repeat_of[2]),
        target=rm.Target(url=safe_url(info.url), model=info.model, endpoint=info.endpoint),
        config=rm.Config(
            isl=workload.isl,
            osl=workload.osl,
            fixed_osl=workload.fixed_osl,
            seed=workload.seed,
            prompt_salt=workload.prompt_salt,
            timeout_s=info.timeout_s,
            workers=info.workers,
            header_names=tuple(info.header_names),
            extra_body=dict(info.extra_body),
            demo=info.demo,
            endpoint_path=info.endpoint_path,
            slo_ttft_ms=options.slo_ttft_ms,
            slo_tpot_ms=options.slo_tpot_ms,
            slo_e2e_ms=options.slo_e2e_ms,
            slo_target=options.slo_target if _any_slo(options) else None,
            min_window_s=MIN_WINDOW_S,
            min_steady_requests=MIN_STEADY_REQUESTS,
            workload=info.workload_record,
            isl_probe=info.isl_probe,
            cost_per_hour=options.cost_per_hour,
        ),
        definitions=DEFINITIONS,
        levels=levels,
        saturation=rm.Saturation(
            knee=knee_of(knee),
            peak_output_throughput=peak,
            client_limited_levels=tuple(lv.level_id for lv, _ in views if lv.client_limited),
            rule=KNEE_RULE.format(tol=KNEE_TOLERANCE),
        ),
        ramp=None if ramp is None else ramp_of(ramp),
        capacity_at_slo=capacity_at_slo([lv for lv, _ in views], levels, options),
        cost_at_slo=cost_at_slo([lv for lv, _ in views], levels, options),
        client=rm.Client(
            workers=info.workers,
            stream_transport=info.stream_transport,
            stream_transport_note=info.stream_transport_note,
            redirects=REDIRECTS,
            max_loop_lag_p99_ms=client.max_loop_lag_p99_ms,
            max_cpu_share=client.max_cpu_share,
            lag_threshold_ms=client.lag_threshold_ms or options.lag_threshold_ms,
            cpu_threshold=options.cpu_threshold,
            health_window_s=options.health_window_s,
            saturated=client.saturated,
            saturated_spans_s=client.saturated_spans_s,
            last=rm.ClientLast(
                loop_lag_p99_ms=health.loop_lag_p99_ms, cpu_share=health.cpu_share, reason=health.reason
            ),
        ),
        totals=rm.Totals(
            completed=snap.completed,
            failed=snap.failed,
            cancelled=snap.cancelled,
            errors=dict(snap.errors),
            malformed_lines_skipped=snap.skipped_lines,
            dropped_arrivals=sum(lv.dropped for lv, _ in views),
        ),
        fatal=snap.fatal,
        notices=client.notices,
        outages=tuple(rm.Outage(start_s=o.start_s, end_s=o.end_s, cause=o.cause) for o in snap.outages),
        server=None if server is None else dict(server.run),
        clock=clock,
    )
