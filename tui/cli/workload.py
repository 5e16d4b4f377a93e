"""The workload group: what each request asks for. Lengths (``--isl``, ``--osl``, their distributions,
``--scenarios``), a dataset, a shared prefix, conversations, a trace replayed at its own times, the prompt
salt; declared here beside `workload_from_args`, which reads them into one `WorkloadConfig`. Each file
named is loaded and checked here, before anything starts, so a bad one is one line (`UsageError`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from tui.argtypes import level_list, non_negative_float, non_negative_int, positive_float, positive_int
from tui.cli.target import endpoint_from_args
from tui.configs import UsageError
from tui.engine.config import (
    MESSAGES_APIS,
    DatasetConfig,
    LengthDist,
    LoadTarget,
    Scenario,
    TraceConfig,
    WorkloadConfig,
)


def add_workload_args(p: argparse.ArgumentParser) -> None:
    """Lengths, the seed, repeated prompts, a tokenizer; the shapes and the trace in groups of their own."""
    w = p.add_argument_group("workload")
    w.add_argument(
        "--isl", type=positive_int, default=WorkloadConfig.isl, metavar="N", help="input tokens per request"
    )
    w.add_argument(
        "--osl", type=positive_int, default=WorkloadConfig.osl, metavar="N", help="output tokens per request"
    )
    w.add_argument(
        "--no-fixed-osl",
        dest="fixed_osl",
        action="store_false",
        help="do not send ignore_eos/min_tokens (let the model stop at EOS)",
    )
    w.add_argument("--seed", type=int, default=WorkloadConfig.seed, help="lengths and prompt text")
    w.add_argument(
        "--repeat-prompts",
        metavar="SALT|RESULTS.json",
        help="send exactly an earlier run's prompts (its prompt salt, or its results file), to measure the "
        "prefix cache it left; by default each run's prompts are its own",
    )
    w.add_argument(
        "--reset-cache",
        action="store_true",
        help="start cold: ask the server to drop its prefix cache before the load starts (vLLM needs "
        "VLLM_SERVER_DEV_MODE=1)",
    )
    _add_shape_args(p)
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


def _add_shape_args(p: argparse.ArgumentParser) -> None:
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
        help=f"file order, or shuffled once by --seed (default {DatasetConfig.order})",
    )
    g.add_argument(
        "--shared-prefix",
        type=non_negative_int,
        default=WorkloadConfig.shared_prefix,
        metavar="N",
        help="every prompt starts with the same N tokens, added to --isl (to measure prefix caching)",
    )
    g.add_argument(
        "--turns",
        type=positive_int,
        default=WorkloadConfig.turns,
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
        type=level_list(float),
        default=None,
        metavar="X[,X,...]",
        help=f"gaps divided by X (default {LoadTarget.speed:g}); bench: one level per speed, each replaying "
        "the trace anew",
    )
    g.add_argument(
        "--trace-start",
        type=non_negative_float,
        default=TraceConfig.start_s,
        metavar="S",
        help="skip the first S seconds",
    )
    g.add_argument("--trace-duration", type=positive_float, metavar="S", help="replay only S seconds of it")
    g.add_argument("--trace-loop", action="store_true", help="start over at the end")
    g.add_argument(
        "--trace-block-size",
        type=positive_int,
        default=TraceConfig.block_size,
        metavar="N",
        help=f"tokens per Mooncake hash_ids block (default {TraceConfig.block_size}; Alibaba's Bailian "
        "traces: 16)",
    )
    g.add_argument("--trace-model", metavar="NAME", help="BurstGPT: only this model's requests")
    g.add_argument(
        "--trace-time-unit",
        choices=["s", "ms", "us", "ns"],
        default=None,
        help="what a timestamp number counts (default: Mooncake ms, BurstGPT s)",
    )


def workload_from_args(ns: argparse.Namespace) -> WorkloadConfig:
    """What each request asks for (``--isl``, ``--osl``, ``--no-fixed-osl``, ``--seed``, ``--tokenizer``, and
    the shaped workload flags: ``--isl-dist``, ``--osl-dist``, ``--scenarios``, ``--dataset*``,
    ``--shared-prefix``, ``--turns``). A dataset or a tokenizer is loaded and checked here, in the face,
    before anything starts: a bad one is a usage error in one line."""
    tokenizer: str | None = ns.tokenizer
    if tokenizer is not None:
        from tui.engine.workload.local_tokenizer import TokenizerError, load_tokenizer

        try:
            load_tokenizer(tokenizer)
        except TokenizerError as exc:
            raise UsageError(str(exc)) from None
    base = WorkloadConfig(isl=ns.isl, osl=ns.osl, fixed_osl=ns.fixed_osl, seed=ns.seed, tokenizer=tokenizer,
                          prompt_salt=prompt_salt_from_args(ns))  # fmt: skip
    return _traced_workload(ns, _shaped_workload(ns, base))


def _traced_workload(ns: argparse.Namespace, base: WorkloadConfig) -> WorkloadConfig:
    """``--trace`` and its flags: the file checked here (its head only), in one line if it is unusable."""
    path: str | None = ns.trace
    if path is None:
        given = (ns.trace_format, ns.trace_speed, ns.trace_duration, ns.trace_model, ns.trace_time_unit)
        if any(given) or ns.trace_loop or ns.trace_start:
            raise UsageError("the --trace-* flags need --trace PATH")
        return base
    if base.dataset is not None or base.isl_dist or base.osl_dist or base.scenarios:
        raise UsageError(
            "--trace says every request's lengths: not with --dataset, --isl-dist, --osl-dist or --scenarios"
        )
    if base.shared_prefix or base.turns > 1:
        raise UsageError("--trace shares prefixes as the trace says: not with --shared-prefix or --turns")
    if ns.rate or ns.concurrency:
        raise UsageError("--trace replays at the trace's own times: not with --rate or --concurrency")
    from tui.engine.traces import TraceError, check_trace

    wanted = TraceConfig(
        path=path,
        format=ns.trace_format,
        block_size=ns.trace_block_size,
        start_s=ns.trace_start,
        duration_s=ns.trace_duration,
        loop=ns.trace_loop,
        model=ns.trace_model,
        time_unit=ns.trace_time_unit,
    )
    if wanted.model and wanted.format not in (None, "burstgpt"):
        raise UsageError("--trace-model filters BurstGPT traces only")
    try:
        trace = check_trace(wanted)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    if trace.model and trace.format != "burstgpt":
        raise UsageError(f"--trace-model filters BurstGPT traces only; {path} is a {trace.format} trace")
    return replace(base, trace=trace)


SALT_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_")


def prompt_salt_from_args(ns: argparse.Namespace) -> str:
    """The run's prompt salt: a new one (`new_salt`), or with ``--repeat-prompts`` an earlier run's, given
    as the salt itself or as its results file (whose ``--seed`` must be this run's too: the prompts follow
    both)."""
    from tui.engine.workload.text import new_salt

    given: str | None = ns.repeat_prompts
    if given is None:
        return new_salt()
    path = Path(given)
    if path.suffix.lower() == ".json" or path.is_file():
        try:
            config = json.loads(path.read_bytes()).get("config") or {}
        except (OSError, ValueError, AttributeError) as exc:
            raise UsageError(f"--repeat-prompts: cannot read {path} as results: {exc}") from None
        seed = config.get("seed", 0)
        if seed != ns.seed:
            raise UsageError(f"--repeat-prompts: {path} ran with --seed {seed}: add --seed {seed}")
        return str(config.get("prompt_salt") or "")  # a run without a salt sent the unsalted prompts
    if not given or len(given) > 64 or not set(given) <= SALT_CHARS:
        raise UsageError(
            f"--repeat-prompts: not a results file nor a salt (letters, digits, - and _): {given!r}"
        )
    return str(given)


# --- shaped workloads --------------------------------------------------------------------------

MAX_LENGTH = 1_000_000
"""Most tokens one draw may ask for: each worker makes one synthetic text as long as the longest prompt."""


def _shaped_workload(ns: argparse.Namespace, base: WorkloadConfig) -> WorkloadConfig:
    isl_dist = _length_dist("--isl-dist", ns.isl_dist) if ns.isl_dist else None
    osl_dist = _length_dist("--osl-dist", ns.osl_dist) if ns.osl_dist else None
    scenarios = _scenarios(ns.scenarios) if ns.scenarios else ()
    path: str | None = ns.dataset
    shared_prefix: int = ns.shared_prefix
    turns: int = ns.turns
    if scenarios and (isl_dist or osl_dist):
        raise UsageError("--scenarios sets both lengths: drop --isl-dist/--osl-dist")
    if path is None and (ns.dataset_format or ns.dataset_order):
        raise UsageError("--dataset-format and --dataset-order need --dataset")
    if path is not None and (scenarios or isl_dist or osl_dist):
        raise UsageError("--isl-dist, --osl-dist and --scenarios shape synthetic prompts: not with --dataset")
    endpoint = endpoint_from_args(ns)[0]
    takes_messages = endpoint in MESSAGES_APIS
    if turns > 1:
        if not takes_messages:
            raise UsageError(
                "--turns needs the chat endpoint or another API of chat messages: --api chat, responses "
                "or messages (a conversation is chat messages)"
            )
        if ns.rate:
            raise UsageError("--turns needs closed-loop users (--concurrency), not --rate")
    if shared_prefix > MAX_LENGTH:
        raise UsageError(f"--shared-prefix is at most {MAX_LENGTH}")
    dataset = None
    if path is not None:
        from tui.engine.workload import DatasetError, check_dataset

        wanted = DatasetConfig(
            path=path, format=ns.dataset_format, order=ns.dataset_order or DatasetConfig.order
        )
        try:
            dataset = check_dataset(wanted)
        except DatasetError as exc:
            raise UsageError(str(exc)) from None
        if dataset.chat and not takes_messages:
            raise UsageError(
                f"{path}: has chat messages, which need the chat endpoint or another API of messages "
                f"(--api chat, responses or messages; not {endpoint})"
            )
    return replace(
        base,
        isl_dist=isl_dist,
        osl_dist=osl_dist,
        scenarios=scenarios,
        dataset=dataset,
        shared_prefix=shared_prefix,
        turns=turns,
    )


def _whole(flag: str, text: str, *, least: int = 1) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{flag}: not a whole number: {text!r}") from None
    if not least <= value <= MAX_LENGTH:
        raise UsageError(f"{flag}: {value} is outside {least}..{MAX_LENGTH}")
    return value


def _length_dist(flag: str, text: str) -> LengthDist:
    """``N``, ``normal:MEAN,STDDEV[,MIN,MAX]`` or ``uniform:MIN,MAX`` (whole tokens; MIN/MAX inclusive)."""
    kind, sep, rest = text.partition(":")
    if not sep:
        n = _whole(flag, text)
        return LengthDist("fixed", n, n, float(n))
    parts = [p.strip() for p in rest.split(",")]
    if kind == "uniform":
        if len(parts) != 2:
            raise UsageError(f"{flag}: uniform wants MIN,MAX, got {rest!r}")
        lo, hi = (_whole(flag, p) for p in parts)
        if lo > hi:
            raise UsageError(f"{flag}: uniform MIN {lo} is above MAX {hi}")
        return LengthDist("uniform", lo, hi, (lo + hi) / 2)
    if kind == "normal":
        if len(parts) not in (2, 4):
            raise UsageError(f"{flag}: normal wants MEAN,STDDEV or MEAN,STDDEV,MIN,MAX, got {rest!r}")
        try:
            mean, std = float(parts[0]), float(parts[1])
        except ValueError:
            raise UsageError(f"{flag}: normal MEAN and STDDEV must be numbers, got {rest!r}") from None
        if not (1 <= mean <= MAX_LENGTH and 0 <= std <= MAX_LENGTH):
            raise UsageError(f"{flag}: normal wants MEAN >= 1 and STDDEV >= 0, got {rest!r}")
        if len(parts) == 4:
            lo, hi = _whole(flag, parts[2]), _whole(flag, parts[3])
        else:
            lo, hi = 1, min(MAX_LENGTH, int(mean + 4 * std) + 1)
        if not lo <= mean <= hi:
            raise UsageError(f"{flag}: normal MEAN {mean:g} is outside MIN..MAX {lo}..{hi}")
        return LengthDist("normal", lo, hi, mean, std)
    raise UsageError(f"{flag}: want N, normal:MEAN,STDDEV[,MIN,MAX] or uniform:MIN,MAX, got {text!r}")


def _scenarios(text: str) -> tuple[Scenario, ...]:
    """``ISLxOSL[:WEIGHT],...``, e.g. ``512x128:0.7,2048x256:0.3`` (weight 1 when left out)."""
    out = []
    for item in (p.strip() for p in text.split(",")):
        pair, _, weight_text = item.partition(":")
        isl_text, x, osl_text = pair.partition("x")
        if not x:
            raise UsageError(f"--scenarios: want ISLxOSL[:WEIGHT], got {item!r}")
        isl, osl = _whole("--scenarios", isl_text), _whole("--scenarios", osl_text)
        try:
            weight = float(weight_text) if weight_text else 1.0
        except ValueError:
            raise UsageError(f"--scenarios: weight is not a number in {item!r}") from None
        if not 0 < weight < float("inf"):
            raise UsageError(f"--scenarios: weight must be positive in {item!r}")
        out.append(Scenario(isl, osl, weight))
    return tuple(out)
