"""Command line: the flags of every subcommand, and `main`, which hands the parsed flags to a face.

Nothing under ``tui/`` imports this module (a test keeps it so): the faces turn flags into configs with
`tui.options`, so the entry point can import the faces without a circle. The number parsers below stay
here because they are argparse types (they raise `argparse.ArgumentTypeError` for argparse to report).
Kept import-light: `tokentop --help` must answer fast, so each subcommand imports its face lazily.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence

from tui import __version__
from tui.argtypes import non_negative_float, non_negative_int, positive_float, positive_int, share
from tui.argv_secret import hide_in_argv
from tui.configs import EXPORTS, CompareConfig, SessionCommandConfig
from tui.demo import DEMO_PROFILE
from tui.engine.config import EngineOptions
from tui.engine.host.pool import PoolError
from tui.engine.sessions.file import SUFFIX
from tui.face_options import (
    bench_config,
    calibrate_config,
    compare_config,
    export_config,
    live_config,
    plot_config,
    replay_config,
    sessions_config,
    watch_config,
)
from tui.options import UsageError, api_key_from_args
from tui.session_options import add_baseline_arg, add_record_args, add_schedule_arg
from tui.sim.flags import add_sim_args


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line (no usage dump) and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        suffix = "" if message.endswith("?") else " (see --help)"
        self.exit(2, f"{self.prog}: error: {message}{suffix}\n")


# --- shared flags -------------------------------------------------------------------------------


def _add_target_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target")
    g.add_argument(
        "--url",
        help="server base URL, with or without /v1 (default: $OPENAI_BASE_URL if set, else the built-in "
        "simulator)",
    )
    g.add_argument("--model", help="model name (default: the first from /v1/models)")
    g.add_argument(
        "--endpoint",
        type=_endpoint,
        default="chat",
        metavar="chat|completions|/PATH",
        help="the API (default chat), or the full request path for a server whose API is not under /v1, "
        "joined to --url as given, nothing added (e.g. /api/v2/chat; its API: --endpoint-type)",
    )
    g.add_argument(
        "--endpoint-type",
        choices=["chat", "completions"],
        default=None,
        help="the API spoken at an --endpoint /PATH (default chat)",
    )
    _add_api_key_args(g)
    g.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="extra HTTP header")
    g.add_argument("--extra-body", metavar="JSON", help="JSON object merged into every request body")
    g.add_argument(
        "--timeout",
        type=positive_float,
        default=300.0,
        metavar="S",
        help="per request, also the longest silence allowed between chunks (default 300)",
    )
    g.add_argument(
        "--ca-cert",
        metavar="PATH",
        help="verify the server's TLS certificate against this PEM bundle (a self-signed or company CA)",
    )
    g.add_argument("--insecure", action="store_true", help="do not verify the server's TLS certificate")
    g.add_argument(
        "--no-trust-env",
        dest="trust_env",
        action="store_false",
        help="ignore HTTP(S)_PROXY, ALL_PROXY, NO_PROXY, SSL_CERT_FILE, SSL_CERT_DIR (honoured by default)",
    )
    sm = p.add_argument_group("server metrics (the server's own view, from its Prometheus /metrics)")
    sm.add_argument(
        "--metrics-url", metavar="URL", help="where to scrape (default: /metrics beside the URL's /v1)"
    )
    sm.add_argument(
        "--server-metrics-log",
        metavar="PATH",
        help="append one JSON line per scrape (for plots after the run)",
    )
    sm.add_argument(
        "--canary-rate",
        type=positive_float,
        metavar="R",
        help="a canary user: R one-token requests/s beside the load, never counted in it (the TTFT a new "
        "user sees now)",
    )
    sm.add_argument(
        "--gpu-metrics",
        metavar="URL|nvml",
        help="the GPU beside the server: a DCGM exporter's URL (port 9400 by default), or nvml on this host",
    )
    sm.add_argument(
        "--no-server-metrics",
        dest="server_metrics",
        action="store_false",
        help="do not scrape the server's /metrics",
    )
    w = p.add_argument_group("workload")
    w.add_argument("--isl", type=positive_int, default=128, metavar="N", help="input tokens per request")
    w.add_argument("--osl", type=positive_int, default=128, metavar="N", help="output tokens per request")
    w.add_argument(
        "--no-fixed-osl",
        dest="fixed_osl",
        action="store_false",
        help="do not send ignore_eos/min_tokens (let the model stop at EOS)",
    )
    w.add_argument("--seed", type=int, default=0, help="lengths and prompt text (default 0)")
    w.add_argument(
        "--repeat-prompts",
        metavar="SALT|RESULTS.json",
        help="send exactly an earlier run's prompts (its prompt salt, or its results file), to measure the "
        "prefix cache it left; by default each run's prompts are its own",
    )
    _add_workload_shape_args(p)
    _add_trace_args(p)
    # exact input lengths: a local tokenizer, or a probe of the server's own count
    w.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="a local tokenizer.json (or its folder): prompts of exactly --isl tokens (tokentop[tokenizer])",
    )
    w.add_argument(
        "--no-isl-probe",
        dest="isl_probe",
        action="store_false",
        help="do not send a few one-token requests first to learn what a prompt costs on this server",
    )
    p.add_argument(
        "--sim-profile",
        default=DEMO_PROFILE,
        metavar="NAME",
        help=f"simulator profile when no --url is given (default {DEMO_PROFILE})",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="engine processes sharing the load (more streams than one core can time)",
    )
    p.add_argument(
        "--user-stagger-ms",
        type=non_negative_float,
        default=5.0,
        metavar="MS",
        help="closed loop: new users start this far apart, a whole step within 1 s (0: all at once)",
    )


def _add_api_key_args(p: argparse.ArgumentParser | argparse._ArgumentGroup, what: str = "API key") -> None:
    key = p.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"{what} (default: $OPENAI_API_KEY); never printed or saved. Other users can see a command "
        "line: tokentop overwrites it in its own (on Linux), but prefer the variable or --api-key-file",
    )
    key.add_argument("--api-key-file", metavar="PATH", help="read the API key from this file (one line)")


def _add_workload_shape_args(p: argparse.ArgumentParser) -> None:
    """Lengths that vary, prompts from a file, a shared prefix, conversations (README "Workloads")."""
    g = p.add_argument_group("workload shape (synthetic lengths, datasets, prefixes, conversations)")
    g.add_argument(
        "--isl-dist",
        metavar="DIST",
        help="input tokens drawn per request: N, normal:MEAN,STDDEV[,MIN,MAX] or uniform:MIN,MAX",
    )
    g.add_argument("--osl-dist", metavar="DIST", help="output tokens drawn per request, as --isl-dist")
    g.add_argument(
        "--scenarios",
        metavar="ISLxOSL:W,...",
        help="weighted (ISL, OSL) pairs, one drawn per request, e.g. 512x128:0.7,2048x256:0.3",
    )
    g.add_argument("--dataset", metavar="PATH", help="prompts from a file (JSONL, ShareGPT JSON or text)")
    g.add_argument(
        "--dataset-format",
        choices=["jsonl", "sharegpt", "text"],
        default=None,
        help="the file's format (default: by its name, else its first character)",
    )
    g.add_argument(
        "--dataset-order",
        choices=["sequential", "shuffle"],
        default=None,
        help="file order, or shuffled once by --seed (default sequential)",
    )
    g.add_argument(
        "--shared-prefix",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="every prompt starts with the same N tokens, added to --isl (to measure prefix caching)",
    )
    g.add_argument(
        "--turns",
        type=positive_int,
        default=1,
        metavar="K",
        help="closed loop: each user carries a conversation for K turns, each adding --isl tokens to its"
        " history, then starts anew (chat only)",
    )


def _add_trace_args(p: argparse.ArgumentParser) -> None:
    """Replay a trace file at its own timestamps (`tokentop help traces`)."""
    g = p.add_argument_group("trace replay (tokentop help traces)")
    g.add_argument("--trace", metavar="PATH", help="replay a trace: Mooncake JSONL, Azure or BurstGPT CSV")
    g.add_argument(
        "--trace-format",
        choices=["mooncake", "azure", "burstgpt"],
        default=None,
        help="the trace's format (default: from its first line, else its name)",
    )
    g.add_argument(
        "--trace-speed",
        type=_level_list(float),
        default=None,
        metavar="X[,X,...]",
        help="gaps divided by X (default 1); bench: one level per speed, each replaying the trace anew",
    )
    g.add_argument(
        "--trace-start", type=non_negative_float, default=0.0, metavar="S", help="skip the first S seconds"
    )
    g.add_argument("--trace-duration", type=positive_float, metavar="S", help="replay only S seconds of it")
    g.add_argument("--trace-loop", action="store_true", help="start over at the end")
    g.add_argument(
        "--trace-block-size",
        type=positive_int,
        default=512,
        metavar="N",
        help="tokens per Mooncake hash_ids block (default 512; Alibaba's Bailian traces: 16)",
    )
    g.add_argument("--trace-model", metavar="NAME", help="BurstGPT: only this model's requests")
    g.add_argument(
        "--trace-time-unit",
        choices=["s", "ms", "us", "ns"],
        default=None,
        help="what a timestamp number counts (default: Mooncake ms, BurstGPT s)",
    )


def _endpoint(text: str) -> str:
    """``chat``, ``completions``, or a request path (it starts with ``/``; a URL belongs in --url)."""
    if text in ("chat", "completions") or (text.startswith("/") and not any(c.isspace() for c in text)):
        return text
    raise argparse.ArgumentTypeError(
        f"want chat, completions or a request path starting with /, got {text!r}"
    )


def _level_list(kind: type[int] | type[float]):  # type: ignore[no-untyped-def]
    def parse(text: str) -> list[float]:
        try:
            values = [kind(part) for part in text.split(",") if part.strip()]
        except ValueError:
            message = f"expected a comma-separated list of numbers: {text!r}"
            raise argparse.ArgumentTypeError(message) from None
        if not values or any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"levels must be positive: {text!r}")
        return values

    return parse


# --- parser -------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tokentop",
        description="top for LLM inference servers: stream load at an OpenAI-compatible server, "
        "turn it up and down live, and watch TTFT, ITL and tokens/s. With no --url (and no "
        "$OPENAI_BASE_URL) it runs a demo against its built-in simulated server.",
        epilog="With no command, the live app. `tokentop CMD --help` gives a command's flags, "
        "`tokentop help` the manual's pages.",
    )
    parser.add_argument("--version", action="version", version=f"tokentop {__version__}")
    sub = parser.add_subparsers(
        dest="command",
        metavar="{live,bench,sim,calibrate,watch,plot,export,ray-check,sessions,replay,compare,help}",
        parser_class=_Parser,
    )

    live = _command(sub, "live", "the live app (default)", "app")
    for p in (parser, live):
        _add_live_args(p)
        _add_ray_args(p, on_node_loss="continue")

    bench = _command(sub, "bench", "headless run over load levels; writes results JSON", "bench")
    _add_bench_args(bench)
    _add_ray_args(bench, on_node_loss="stop")

    sim = _command(sub, "sim", "run the built-in simulated OpenAI-compatible server", "simulator")
    add_sim_args(sim)

    cal = _command(sub, "calibrate", "find how many streams this machine can time accurately", "performance")
    _add_calibrate_args(cal)

    watch = _command(sub, "watch", "no load: only the server's own signals, from its /metrics", "watch")
    _add_watch_args(watch)
    _add_session_commands(sub)

    plot = _command(sub, "plot", "the SVG plot of a saved run", "exports")
    plot.add_argument("results", metavar="RESULTS", help="a results JSON file or a session tokentop wrote")
    plot.add_argument("--out", metavar="PATH.svg", help="where to write it (default: beside RESULTS, .svg)")

    export = _command(
        sub, "export", "a saved run for other tools: vLLM, CSV, llm-d, AIPerf, a Mooncake trace", "exports"
    )
    _add_export_args(export)

    check = _command(
        sub, "ray-check", "a Ray cluster's nodes: versions, CPUs, clocks, the target reached", "ray"
    )
    check.add_argument("--ray", default="auto", metavar="ADDRESS", help="auto, host:port or ray://host:10001")
    check.add_argument("--url", help="the server the nodes must reach (checked from each node)")
    manual = _command(sub, "help", "the manual: list its pages, or print one")
    manual.add_argument("topic", nargs="?", help="a page (e.g. numbers, keys, bench); none lists them")
    return parser


def _command(
    sub: argparse._SubParsersAction[_Parser], name: str, what: str, page: str | None = None
) -> _Parser:
    """A subcommand: ``what`` in the top listing, and at the head of its own --help with its manual page."""
    more = f" More: `tokentop help {page}`." if page else ""
    return sub.add_parser(name, help=what, description=f"{what[0].upper()}{what[1:]}.{more}")


def _add_session_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    """sessions, replay, compare (a session's exports are `tokentop export`'s)."""
    ls = _command(sub, "sessions", "list the recorded sessions (newest last)", "sessions")
    ls.add_argument("--dir", metavar="DIR", help="where to look (default: the sessions folder)")
    rp = _command(sub, "replay", "the live app's panes over a recorded session, no server", "sessions")
    rp.add_argument("session", metavar="SESSION", help=f"a session tokentop recorded (*{SUFFIX})")
    rp.add_argument("--theme", default=None, metavar="NAME|PATH", help="theme name or theme file")
    rp.add_argument("--speed", type=float, default=1.0, metavar="X", help="play X times faster (default 1)")
    cp = _command(sub, "compare", "compare sessions or results files, level by level", "sessions")
    cp.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="sessions (a path, a file name or label in the sessions folder) or results files; the first is "
        "the base; A,B,... is one side made of repeated runs",
    )
    cp.add_argument(
        "--threshold",
        type=positive_float,
        default=CompareConfig.threshold_pct,
        metavar="PCT",
        help="the smallest change that is better/worse (default %(default)g %%)",
    )
    cp.add_argument("--plot", metavar="PATH.svg", help="also write both curves to this SVG")
    form = cp.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="a Markdown table (for a pull request)")
    form.add_argument("--json", action="store_true", help="the comparison as JSON")


def _add_export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", metavar="RESULTS", help="a results JSON file or a session tokentop wrote")
    p.add_argument(
        "--to",
        required=True,
        choices=EXPORTS,
        help="vllm: one vllm-bench-serve JSON per level (a folder); csv: the level table; llmd: llm-d "
        "Benchmark Report v0.2 per level (a folder); aiperf: AIPerf's per-request profile_export.jsonl; "
        "mooncake: a session's requests as a Mooncake trace",
    )
    p.add_argument("--out", metavar="PATH", help="file or folder to write (default: beside RESULTS)")
    p.add_argument(
        "--append",
        action="store_true",
        help="with --to vllm: vLLM's --append-result layout, one line per level appended to one file",
    )
    p.add_argument(
        "--requests-log",
        metavar="FILE",
        help="with --to aiperf: the run's --requests-log, which holds the per-request records",
    )


def _add_ray_args(p: argparse.ArgumentParser, *, on_node_loss: str) -> None:
    g = p.add_argument_group("more than one machine (needs tokentop[ray]; `tokentop help ray`)")
    g.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the engine workers on a Ray cluster: auto, host:port, or ray://host:10001 (Ray Client)",
    )
    g.add_argument(
        "--workers-per-node",
        type=positive_int,
        metavar="N",
        help="with --ray: N workers on each node (default: --workers spread over the nodes by CPUs)",
    )
    g.add_argument(
        "--ray-head-workers",
        action="store_true",
        help="with --ray: also put workers on this machine's own node (by default none, if others exist)",
    )
    g.add_argument(
        "--on-node-loss",
        choices=["stop", "continue"],
        default=on_node_loss,
        help=f"with --ray, when a node is lost: stop the run (results saved) or split the load over the "
        f"workers left as a new level (default {on_node_loss})",
    )


def _print_manual(topic: str | None) -> int:
    """`tokentop help [TOPIC]`: the listing, or the page, from the manual shipped in the package."""
    from tui import manual

    if topic is None:
        print(manual.listing(), end="")
        return 0
    found = manual.page(topic)
    if found is None:
        close = manual.nearest(topic)
        hint = f" (did you mean {close!r}?)" if close else ""
        print(f"tokentop: error: no manual page {topic!r}{hint}; `tokentop help` lists them", file=sys.stderr)
        return 2
    print(found.text, end="" if found.text.endswith("\n") else "\n")
    return 0


def _add_watch_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="server base URL, with or without /v1 (default: $OPENAI_BASE_URL)")
    _add_api_key_args(p, what="API key for /metrics")
    p.add_argument("--metrics-url", metavar="URL", help="where to scrape (default: /metrics beside /v1)")
    p.add_argument(
        "--interval",
        type=positive_float,
        default=1.0,
        metavar="S",
        help="seconds between scrapes (default 1)",
    )
    p.add_argument("--server-metrics-log", metavar="PATH", help="append one JSON line per scrape")
    p.add_argument(
        "--gpu-metrics",
        metavar="URL|nvml",
        help="the GPU beside the server: a DCGM exporter's URL (port 9400 by default), or nvml on this host",
    )
    p.add_argument(
        "--canary-rate",
        type=positive_float,
        metavar="R",
        help="a canary user: R one-token requests/s the only load watch sends (the TTFT a new user sees now)",
    )
    p.add_argument("--output", metavar="results.json", help="write what the server reported on quit")
    p.add_argument("--theme", default=None, metavar="NAME|PATH", help="theme name or theme file")


def _add_live_args(p: argparse.ArgumentParser) -> None:
    _add_target_args(p)
    load = p.add_mutually_exclusive_group()
    load.add_argument(
        "--concurrency",
        type=positive_int,
        default=None,
        metavar="N",
        help="start closed-loop with N users (default 1; 4 in the demo)",
    )
    load.add_argument(
        "--rate", type=positive_float, default=None, metavar="R", help="start open-loop at R requests/s"
    )
    p.add_argument(
        "--theme",
        default=None,
        metavar="NAME|PATH",
        help="theme name (dark, light, high-contrast, or any file in the themes folder) "
        "or the path of a theme file",
    )
    p.add_argument("--output", metavar="results.json", help="write results here on quit")
    p.add_argument(
        "--requests-log", metavar="requests.jsonl", help="append one JSON line per finished request"
    )
    p.add_argument(
        "--slo-ttft-ms",
        type=positive_float,
        metavar="MS",
        help="TTFT objective: SLO attainment and goodput per level; the auto ramp (a) finds capacity at it",
    )
    p.add_argument(
        "--slo-tpot-ms",
        type=positive_float,
        metavar="MS",
        help="TPOT objective: SLO attainment and goodput per level; the auto ramp (a) finds capacity at it",
    )
    _add_slo_args(p)
    add_record_args(p)
    add_schedule_arg(p)
    add_baseline_arg(p)


def _add_slo_args(p: argparse.ArgumentParser) -> None:
    """The SLO's E2E objective and the attainment the auto ramp's capacity needs (beside --slo-ttft-ms and
    --slo-tpot-ms; `tokentop help numbers`)."""
    p.add_argument("--slo-e2e-ms", type=positive_float, metavar="MS", help="E2E latency objective (goodput)")
    p.add_argument(
        "--slo-target",
        type=share,
        default=EngineOptions.slo_target,
        metavar="SHARE",
        help="the auto ramp's capacity at SLO: the highest load whose attainment's 95 %% lower bound reaches "
        "this (default %(default)g)",
    )


def _add_bench_args(p: argparse.ArgumentParser) -> None:
    _add_target_args(p)
    load = p.add_mutually_exclusive_group()
    load.add_argument(
        "--concurrency",
        type=_level_list(int),
        metavar="N,N,...",
        help="closed-loop levels, e.g. 1,2,4,8 (default 1)",
    )
    load.add_argument("--rate", type=_level_list(float), metavar="R,R,...", help="open-loop levels in req/s")
    p.add_argument("--arrival", choices=["poisson", "constant"], default="poisson")
    p.add_argument("--max-concurrency", type=positive_int, metavar="N", help="open loop: cap on in-flight")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument(
        "--requests",
        type=positive_int,
        metavar="N",
        help="finished requests per level, counted in its steady window "
        "(default max(20, 4 x users); at a rate, 5 s of arrivals)",
    )
    stop.add_argument("--duration", type=positive_float, metavar="S", help="seconds per level")
    p.add_argument("--output", metavar="results.json", help="write results JSON here")
    p.add_argument("--requests-log", metavar="requests.jsonl", help="one JSON line per request as it ends")
    p.add_argument(
        "--vllm-results",
        metavar="DIR",
        help="also write one JSON file per level here, in vllm bench serve --save-result's shape",
    )
    p.add_argument("--csv", metavar="PATH", help="also write the level table here as CSV (one row per level)")
    p.add_argument(
        "--plot",
        metavar="PATH.svg",
        help="also write an SVG plot here: output tok/s vs the load, the knee, TTFT/ITL per level",
    )
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument("--slo-ttft-ms", type=positive_float, metavar="MS", help="goodput: TTFT objective")
    p.add_argument("--slo-tpot-ms", type=positive_float, metavar="MS", help="goodput: TPOT objective")
    _add_slo_args(p)
    p.add_argument(
        "--sim-time-scale",
        type=positive_float,
        default=1.0,
        metavar="X",
        help="with no --url: run the simulator X times faster (tests, quick demos)",
    )
    add_record_args(p)
    add_schedule_arg(p)


def _add_calibrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--token-rate",
        type=positive_float,
        default=50.0,
        metavar="TOK/S",
        help="tokens per second of each stream (default 50)",
    )
    p.add_argument(
        "--max-streams",
        type=positive_int,
        default=1024,
        metavar="N",
        help="the most streams tried (default 1024)",
    )
    p.add_argument(
        "--p99-budget-ms",
        type=positive_float,
        default=3.0,
        metavar="MS",
        help="largest client-added p99 ITL error counted as accurate (default 3)",
    )
    p.add_argument(
        "--step-duration",
        type=positive_float,
        default=5.0,
        metavar="S",
        help="seconds measured per stream count, after a warm-up of about 5 s (default 5)",
    )
    p.add_argument(
        "--workers", type=positive_int, default=1, metavar="N", help="engine processes (default 1)"
    )
    p.add_argument(
        "--lockstep",
        action="store_true",
        help="every stream emits at the same instant, like a batched server's decode step "
        "(default: each stream on its own phase)",
    )


# --- entry point --------------------------------------------------------------------------------


def check_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Refuse a flag no command has, naming the nearest real one (``--thme`` -> ``--theme``), before argparse
    reads on: with subcommands it takes the flag's value for a command and says "invalid choice". A flag
    before a subcommand is refused too: the subcommand's own default for it would silently win."""
    commands: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            commands = dict(action.choices)
    current = parser
    before: list[str] = []  # flags given before a subcommand: its own defaults would silently replace them
    for arg in argv:
        if arg == "--":
            return
        if current is parser and arg in commands:
            if before:
                parser.error(
                    f"{' '.join(before)} before {arg!r} would be ignored: put the options after it "
                    f"(tokentop {arg} {before[0]} ...)"
                )
            current = commands[arg]
            continue
        if current is parser and arg.startswith("--") and len(arg) > 2:
            before.append(arg.partition("=")[0])
        if not arg.startswith("--") or len(arg) < 3:
            continue
        name = arg.partition("=")[0]
        known = [s for s in current._option_string_actions if s.startswith("--")]
        if any(k.startswith(name) for k in known):  # the flag, or an abbreviation argparse accepts
            continue
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f": did you mean {near[0]}?" if near else ""
        current.error(f"unrecognized argument {name}{hint}")


def main(argv: Sequence[str] | None = None) -> int:
    # numpy's OpenBLAS starts a thread per core as it loads, ~80 ms of CPU in each tokentop process that
    # imports it (the face, every worker), taken from the server under test on a shared box; tokentop does
    # no linear algebra. The workers and the simulator inherit it; a value the user set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser()
    check_flags(parser, sys.argv[1:] if argv is None else argv)
    ns = parser.parse_args(argv)
    command = ns.command or "live"
    if getattr(ns, "api_key", None) and not hide_in_argv(ns.api_key):
        print(
            "tokentop: warning: --api-key is visible to other users in the process list; "
            "give it by $OPENAI_API_KEY or --api-key-file",
            file=sys.stderr,
        )
    try:
        if hasattr(ns, "api_key"):  # --api-key-file read once, here, before any face starts anything
            ns.api_key, ns.api_key_file = api_key_from_args(ns), None
        if command == "help":
            return _print_manual(ns.topic)
        if command == "sim":
            from tui.sim.server import run_from_args as run_sim

            return run_sim(ns)
        if command == "bench":
            from tui.bench.run import run as run_bench

            return run_bench(bench_config(ns))
        if command == "calibrate":
            from tui.calibrate.command import run as run_calibrate

            return run_calibrate(calibrate_config(ns))
        if command in ("sessions", "replay", "compare"):
            from tui.session_commands import run_session_command

            config: SessionCommandConfig = (
                sessions_config(ns)
                if command == "sessions"
                else replay_config(ns)
                if command == "replay"
                else compare_config(ns)
            )
            return run_session_command(config)
        if command == "watch":
            from tui.app.watch import run as run_watch

            return run_watch(watch_config(ns))
        if command in ("plot", "export"):
            from tui.results_command import run_export, run_plot

            return run_plot(plot_config(ns)) if command == "plot" else run_export(export_config(ns))
        if command == "ray-check":
            from tui.ray_check import run as run_ray_check

            return run_ray_check(ns.ray, ns.url)
        from tui.app.run import run as run_live

        return run_live(live_config(ns))
    except UsageError as exc:
        print(f"tokentop: error: {exc}", file=sys.stderr)
        return 2
    except PoolError as exc:  # the workers cannot be placed on the Ray cluster: one line
        print(f"tokentop: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
