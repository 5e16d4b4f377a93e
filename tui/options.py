"""Flags to frozen configs, for every face (the live app, bench and whatever comes next).

The faces take their options from here, never from `tui.cli`: the entry point imports the faces, so a face
importing it back would close a circle (harlequin's ``hsql/cli.py`` takes its options from
``harlequin.config`` for the same reason). `tui.cli` defines the flags; this module turns the parsed
`argparse.Namespace` into `tui.engine.config` values and reports an unusable value as a `UsageError`.
"""

from __future__ import annotations

import argparse
import json
import os

from tui.demo import DemoConfig
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig, normalise_base_url

DEMO_CONCURRENCY = 4
"""The demo starts at 4 users so every pane has something to show at once; a real target starts at 1."""


class UsageError(Exception):
    """A flag value that parsed but cannot be used; reported in one line, exit status 2."""


def demo_from_args(ns: argparse.Namespace, *, time_scale: float = 1.0) -> DemoConfig | None:
    """The built-in simulator to start, or None when the user gave ``--url``. ``time_scale``: bench's
    ``--sim-time-scale`` (the live app runs the demo in real time)."""
    if ns.url is not None:
        return None
    return DemoConfig(profile=ns.sim_profile, seed=ns.seed, time_scale=time_scale)


def target_from_args(ns: argparse.Namespace, *, demo_url: str | None = None) -> TargetConfig:
    """Build the target; `demo_url` is the simulator's URL when tokentop started it itself."""
    url = ns.url or demo_url
    if url is None:
        raise UsageError("no --url given")
    try:
        base_url = normalise_base_url(url)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    headers: list[tuple[str, str]] = []
    for item in ns.header:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header wants NAME:VALUE, got {item!r}")
        headers.append((name.strip(), value.strip()))
    extra: tuple[tuple[str, object], ...] = ()
    if ns.extra_body:
        try:
            body = json.loads(ns.extra_body)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--extra-body is not valid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(body, dict):
            raise UsageError("--extra-body must be a JSON object")
        extra = tuple(body.items())
    api_key = ns.api_key or os.environ.get("OPENAI_API_KEY") or None
    return TargetConfig(
        base_url=base_url,
        model=ns.model,
        endpoint=ns.endpoint,
        api_key=api_key,
        headers=tuple(headers),
        extra_body=extra,
        timeout_s=ns.timeout,
        demo=ns.url is None,
    )


def workload_from_args(ns: argparse.Namespace) -> WorkloadConfig:
    """What each request asks for (``--isl``, ``--osl``, ``--no-fixed-osl``, ``--seed``, ``--tokenizer``).
    A tokenizer that cannot be loaded is a usage error, said in one line before anything starts."""
    tokenizer = getattr(ns, "tokenizer", None)
    if tokenizer is not None:
        from tui.engine.workload.local_tokenizer import TokenizerError, load_tokenizer

        try:
            load_tokenizer(tokenizer)
        except TokenizerError as exc:
            raise UsageError(str(exc)) from None
    return WorkloadConfig(isl=ns.isl, osl=ns.osl, fixed_osl=ns.fixed_osl, seed=ns.seed, tokenizer=tokenizer)


def engine_options_from_args(ns: argparse.Namespace) -> EngineOptions:
    """The engine tunables a face's flags set: the SLOs, the closed-loop user stagger, server metrics."""
    metrics_url = getattr(ns, "metrics_url", None)
    if metrics_url is not None and not metrics_url.startswith(("http://", "https://")):
        raise UsageError(f"--metrics-url must start with http:// or https://: {metrics_url!r}")
    return EngineOptions(
        slo_ttft_ms=ns.slo_ttft_ms,
        slo_tpot_ms=ns.slo_tpot_ms,
        user_stagger_s=ns.user_stagger_ms / 1e3,
        server_metrics=getattr(ns, "server_metrics", True),
        metrics_url=metrics_url,
        isl_probe=getattr(ns, "isl_probe", True),
    )


def initial_load(ns: argparse.Namespace, *, demo: bool) -> LoadTarget:
    """The live app's first target: ``--rate`` or ``--concurrency``, else 1 user (4 in the demo)."""
    if ns.rate is not None:
        return LoadTarget(mode="rate", rate=ns.rate)
    if ns.concurrency is not None:
        return LoadTarget(mode="concurrency", concurrency=ns.concurrency)
    return LoadTarget(mode="concurrency", concurrency=DEMO_CONCURRENCY if demo else 1)


def level_targets_from_args(ns: argparse.Namespace) -> list[LoadTarget]:
    """bench's levels, one per ``--concurrency`` or ``--rate`` value (default: one user)."""
    if ns.rate:
        return [
            LoadTarget(mode="rate", rate=float(r), arrival=ns.arrival, max_concurrency=ns.max_concurrency)
            for r in ns.rate
        ]
    if ns.max_concurrency is not None:
        raise UsageError("--max-concurrency applies to open-loop --rate levels")
    return [LoadTarget(mode="concurrency", concurrency=int(c)) for c in (ns.concurrency or [1])]
