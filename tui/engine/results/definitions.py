"""What every key of the results means, in one place: written into each results file (``definitions``), shown
by the manual (`tui/manual/results.md` lists the same keys) and checked by a test against the model."""

from __future__ import annotations

from tui.engine.aggregate.metrics import KNEE_RULE, KNEE_TOLERANCE

DEFINITIONS: dict[str, str] = {
    "ttft": "time to first token: first chunk with generated text (content or reasoning) minus request sent",
    "tpot": "time per output token excluding the first: (E2E - TTFT) / (output tokens - 1), per request",
    "itl": "inter-token latency as vLLM/SGLang: gaps between consecutive content chunks, all gaps pooled",
    "coalesced_chunk_gaps": "chunk gaps of 0 ms in the window: chunks that arrived in one read, stamped "
    "alike (a p50 ITL of 0 means most chunks shared a read: the client's reads, not the server's speed)",
    "itl_e2e": "LLMPerf inter-token latency: E2E / output tokens, per request, TTFT included",
    "e2el": "end-to-end latency: end of stream minus request sent",
    "duration": "length in seconds of the level's window (the throughput denominator)",
    "steady_window": "one rule for the table, the curve, the results and a quit: the window starts at "
    "the steady start (once every request of earlier levels has ended and one median E2E of this level "
    "has passed; while it never got there, once every worker had applied the level) and ends at the "
    "level's end, but never past the send of a request whose chunks are not all known: one still in "
    "flight, or one cancelled at quit or Ctrl-C (its tokens are not counted and its time is not in the "
    "window). So every request sent inside the window has ended, and every chunk inside it is known",
    "steady": "the window starts at the steady start, lasts at least min_window_s and one median E2E, and "
    "holds at least min_steady_requests successful requests sent in it (the latency statistics' population)",
    "too_short": "the window is shorter than max(min_window_s, the level's median E2E), or no request of the "
    "level finished: the rates (request_throughput, output_throughput, total_token_throughput, "
    "request_goodput) are null, never 0 or an extrapolation",
    "outages": "spans the server did not answer (start_s, end_s, cause): after it had answered once, every "
    "request refused, reset or answered 502/503 for over a second, until the first answer byte after",
    "server_down_s": "seconds of the level's window inside an outage: the rates (throughput and goodput, "
    "slo's too) are over the rest of it, the SLO attainment still counts the window's failed requests "
    "(the outage's among them) against, and the level is not steady",
    "completed": "successful requests sent in the window (the population of the latency stats)",
    "failed": "failed requests sent in the window",
    "output_throughput": "output tokens arriving in the window / duration; over requests (measured_over), "
    "the successful requests' content chunks (tokens per chunk from server usage); over arrivals, every "
    "stream's, finished or not (partial_output_tokens of them unfinished)",
    "measured_over": "requests: every figure over the requests sent in the window, all of which ended; "
    "arrivals (answers longer than the window: none finished, or a median E2E of 2 s or more): the window "
    "starts once earlier levels' requests ended, every user had a first token and a median TTFT passed, "
    "and ends at the level's end; output_throughput, ttft and itl count what arrived in it from every "
    "stream, tpot, e2el, itl_e2e and completed the requests that ended in it",
    "in_flight_at_end": "streams of the level unfinished when the figures were taken (in flight, or "
    "cancelled at quit)",
    "partial_output_tokens": "output tokens of unfinished streams counted in output_throughput",
    "population": "per metric: n (samples), unfinished_included, and null_because when it has none",
    "request_throughput": "successful requests ending in the window / duration",
    "total_token_throughput": "output_throughput plus input tokens of requests sent in the window / duration",
    "request_goodput": "requests of the window's population (as completed) that met every SLO given "
    "(slo_ttft_ms, slo_tpot_ms, slo_e2e_ms) / duration; as slo.request_goodput",
    "slo": "with an SLO, per level: attainment = met / requests, where requests are the window's successful "
    "and failed ones (a failure counts against) and met those meeting every objective; attainment_low and "
    "attainment_high its Wilson 95 % interval; cut: the level's cancelled requests, in no share; "
    "request_goodput and output_goodput: requests/s and output tokens/s of the met ones over the window",
    "slo_target": "the attainment the capacity at SLO needs from its 95 % lower bound",
    "capacity_at_slo": "with an SLO: the highest load whose attainment's 95 % lower bound met slo_target, "
    "over every level (as bench's capacity line): its level_id (null: none did), mode, value (users, req/s "
    "or speed-up), output_goodput and request_goodput (its slo's)",
    "usd_per_mtok_output": "with --cost-per-hour: cost_per_hour / 3600 / output_throughput * 1e6, dollars "
    "per million output tokens; usd_per_mtok_input the same over total_input_tokens / duration (the "
    "whole price on each kind: they do not add); slo.usd_per_mtok_goodput over output_goodput",
    "cost_at_slo": "with --cost-per-hour and an SLO: the capacity at SLO (the highest load whose "
    "attainment's 95 % lower bound met slo_target) and its slo.usd_per_mtok_goodput",
    "joules_per_output_token": "server.gpu: the GPUs' energy counter's increase between the first and last "
    "scrape inside the window (energy_j) over the seconds between them (energy_s), over output_throughput; "
    "output_tokens_per_joule is its inverse",
    "interrupted": "the run was cut short (interrupted_by: quit, SIGINT, SIGTERM, ...); its last level ends "
    "where the run stopped, under the window rule above",
    "tokens_per_chunk": "output tokens / content chunks, mean over requests (>1 with speculative decoding)",
    "per_request_output_throughput": "median over requests of (output tokens - 1) / (E2E - TTFT), tokens/s",
    "sched_lag": "open loop: actual send time minus scheduled arrival time",
    "histograms": "per level, counts of ttft, e2el and itl (vLLM's chunk gaps) in ms over exactly the "
    "population of its latency stats (the successful requests sent in the window, and their chunk gaps), "
    "in log-spaced bins [edges_ms[i], edges_ms[i+1]), 10 per decade, from the first to the last non-empty "
    "one; a value beyond 0.1 ms..100 s widens its end bin. The e2el counts sum to completed while "
    "exact_stats (else to the uniform sample the stats come from); ttft counts those with generated text",
    "output tokens": "server usage.completion_tokens when reported, else one per content chunk",
    "input tokens": "server usage.prompt_tokens when reported, else the requested input length",
    "prefix_cache_hit_rate": "cached_prompt_tokens (usage.prompt_tokens_details.cached_tokens, summed over "
    "the window's population) / the prompt tokens of the requests that reported it; null when none did",
    "knee": KNEE_RULE.format(tol=KNEE_TOLERANCE),
    "ramp": "what the auto ramp said when it stopped (the latest ramp): stopped_by, its line, the levels it "
    "ran, and its knee and peak, by the knee rule over those levels once they had ended and all their "
    "requests were in (settled), so they are those levels' saved figures; the saturation knee is over "
    "every level of the run, so a level run after the ramp can move it; with an SLO, capacity_at_slo: the "
    "highest load whose attainment lower bound met slo_target (capacity_level_id, capacity_output_goodput)",
    "stats": "mean, std (population), median, and linear-interpolated percentiles, as numpy/vLLM",
    "server.ttft_parts": "per level, the mean TTFT in parts: queue, prefill and the rest of the server's "
    "(its histograms' _sum/_count deltas), and network/client = the client's mean TTFT over its requests "
    "whose first token landed between the same two scrapes (client_count) minus the server's; no part is "
    "below 0: one that cannot be matched is a bound, named with its reason in bounds",
    "server.gpu": "per level, the GPU beside the server (DCGM fields, time-averaged; per GPU and for all)",
    "server.canary": "per level, the canary user's one-token requests sent in the window (never counted in "
    "the level): n, mean_ms and p99_ms of their TTFT, errors",
    "server": "per level, the server's own /metrics over the level's steady window (its whole span when it "
    "has none): gauges time-averaged (running_mean, waiting_mean, kv_usage_mean), counters as rates, its "
    "latency histograms from bucket deltas (ms): mean exact, each pNN a number only where its bucket is "
    "narrow, else null with buckets.pNN = {kind: bound|range|above, low, high} (estimate from buckets); "
    "restarts: times its counters went back; null when not scraped; late_scrapes (the level's, and the run's "
    "in server, when any): scrapes that took over a second or timed out after the server had answered, their "
    "figures older",
    "max_output_tokens_per_s": "as vLLM: the most output tokens arriving in one whole second of the level's "
    "window (the window cut into seconds from its start), tokens/s; absent when the window is shorter than a "
    "second",
    "max_concurrent_requests": "as vLLM: the most requests sent in the window that were in flight during one "
    "second of it (a request counts in every second it touches)",
    "client_saturated": "per level: the client limited the load over its window, so no knee is taken from "
    "it; client.limited_by names the signs, each 5 % or more: cpu (a worker's CPU share over cpu_threshold), "
    "loop_lag (closed loop: its mean loop lag of the median E2E), in_flight (closed loop: "
    "client.mean_in_flight below the users), send_lag (uncapped open loop: client.send_shortfall, 1 - the "
    "requests sent in the window / the arrivals its schedule had due in it); "
    "client.timing_bound_ms: every latency of the level is +- this (the loop lag p99 over its window), "
    "client.timing_uncertain: the figures it is 5 % or more of. client.saturated (run): a worker's "
    "event-loop lag p99 over lag_threshold_ms (4x its lag with no load at start, 1-10 ms) or CPU share over "
    "cpu_threshold in two consecutive disjoint health windows (health_window_s each), at any time; "
    "max_loop_lag_p99_ms and max_cpu_share are the raw rolling maxima, a momentary stall included; "
    "saturated_spans_s: [from, to] seconds of run time while flagged (to null: until the end), the condition "
    "having begun one health window before from",
}
