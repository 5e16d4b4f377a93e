"""The simulator's own flags, so the simulator can stand alone (`python -m tui.sim`).

`tokentop sim` (`tui.cli.sim`) declares the same flags by calling `add_sim_args`, so the two cannot drift:
every flag here works on both entry points, and `tui.sim.config.config_from_args` reads each by name. A
flag's default is its `SimConfig` field's.
"""

from __future__ import annotations

import argparse

from tui.argtypes import non_negative_float, positive_float, positive_int
from tui.sim.config import SimConfig

DEFAULT_PROFILE = "small-gpu"


def add_sim_args(p: argparse.ArgumentParser) -> None:
    """Declare every `tokentop sim` flag on `p` (what `config_from_args` reads)."""
    p.add_argument("--host", default=SimConfig.host, help="the address to listen on")
    p.add_argument("--port", type=int, default=SimConfig.port, help="0 picks a free port (printed)")
    p.add_argument(
        "--profile", default=DEFAULT_PROFILE, metavar="NAME", help="performance profile (--list-profiles)"
    )
    p.add_argument("--list-profiles", action="store_true", help="print the profiles and exit")
    p.add_argument(
        "--time-scale",
        type=positive_float,
        default=SimConfig.time_scale,
        metavar="X",
        help="run X times faster than the profile (for tests)",
    )
    p.add_argument(
        "--seed", type=int, default=SimConfig.seed, help="the generated text, faults and per-request draws"
    )
    p.add_argument(
        "--tokens-per-chunk",
        type=positive_int,
        default=SimConfig.tokens_per_chunk,
        metavar="N",
        help="tokens per SSE chunk (stream interval / speculative decoding)",
    )
    p.add_argument(
        "--reasoning-tokens",
        type=int,
        default=SimConfig.reasoning_tokens,
        metavar="N",
        help="emit N reasoning_content tokens before the answer",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND=RATE",
        help="inject faults: error500, error429, disconnect, stall, malformed (rate 0..1); "
        "queue503=N rejects when more than N wait",
    )
    p.add_argument(
        "--truth-log", metavar="PATH", help="write one JSON line per request with server-side times"
    )
    p.add_argument(
        "--state-log",
        metavar="PATH",
        help="write one JSON line per scheduler state change (time, running, waiting, KV tokens used)",
    )
    p.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_false",
        help="answer GET /metrics with 404, like a server started without its metrics switch",
    )
    p.add_argument(
        "--no-prefix-cache",
        dest="prefix_cache",
        action="store_false",
        help="no prefix cache: never report cached prompt tokens (as vLLM with --no-enable-prefix-caching)",
    )
    p.add_argument(
        "--no-cache-reset",
        dest="cache_reset",
        action="store_false",
        help="answer POST /reset_prefix_cache with 404, as vLLM does without VLLM_SERVER_DEV_MODE=1",
    )
    p.add_argument(
        "--keep-alive",
        type=non_negative_float,
        default=SimConfig.keep_alive_s,
        metavar="S",
        help=f"close a connection idle for S seconds, like uvicorn under vLLM/SGLang "
        f"(default {SimConfig.keep_alive_s:g}; 0 never closes)",
    )
    p.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop when standard input closes (a parent that holds it and dies takes the simulator along)",
    )
    cap = p.add_argument_group("capacity overrides (default: the profile's)")
    cap.add_argument("--max-seqs", type=positive_int, metavar="N", help="most sequences running at once")
    cap.add_argument("--kv-tokens", type=positive_int, metavar="N", help="KV cache size in tokens")
    cap.add_argument(
        "--prefill-chunk",
        type=int,
        metavar="N",
        help="prefill token budget per step; 0 turns chunked prefill off",
    )
