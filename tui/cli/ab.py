"""The A/B group of `tokentop bench`: ``--ab URL`` (a second endpoint, B, under the same levels), its model,
headers and key, how the load meets both (``--ab-mode``) and the smallest change that is a verdict, read
into an `AbConfig`. B takes A's API, timeout, body and trust; never A's key or headers (A's secrets)."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from typing import get_args

from tui.argtypes import positive_float
from tui.cli.target import headers_from, refuse_credentials, with_scheme
from tui.configs import AbConfig, AbMode, UsageError
from tui.engine.config import TargetConfig, normalise_base_url

AB_KEY_ENV = "TOKENTOP_AB_API_KEY"
"""B's API key: from the environment only, so it is never on a command line; never printed or saved."""


def add_ab_args(p: argparse.ArgumentParser) -> None:
    """--ab, --ab-model, --ab-header, --ab-mode, --ab-block (with alternate), --ab-threshold."""
    g = p.add_argument_group("A/B (tokentop help ab)")
    g.add_argument(
        "--ab",
        metavar="URL",
        help=f"also run every level against this server (B) and judge B against A level by level; "
        f"its key from ${AB_KEY_ENV}",
    )
    g.add_argument("--ab-model", metavar="NAME", help="B's model (default: the first from B's /v1/models)")
    g.add_argument(
        "--ab-header", action="append", default=[], metavar="NAME:VALUE", help="extra HTTP header for B"
    )
    g.add_argument(
        "--ab-mode",
        choices=get_args(AbMode),
        default=AbConfig.mode,
        help="parallel: each level's load against both at once, the same prompts in the same order; "
        "alternate: against one at a time, in turns of --ab-block seconds (two doors to one pool)",
    )
    g.add_argument(
        "--ab-block",
        type=positive_float,
        default=AbConfig.block_s,
        metavar="S",
        help="alternate: the longest turn of a side (bench splits a level of --duration D into equal turns)",
    )
    g.add_argument(
        "--ab-threshold",
        type=positive_float,
        default=AbConfig.threshold_pct,
        metavar="PCT",
        help="the smallest change in percent that is a verdict (as compare's --threshold)",
    )


def ab_from_args(ns: argparse.Namespace, a: TargetConfig) -> AbConfig | None:
    """B's config from the flags, built on A's target ``a``; None without ``--ab``."""
    if ns.ab is None:
        for flag, given in (("--ab-model", ns.ab_model), ("--ab-header", ns.ab_header)):
            if given:
                raise UsageError(f"{flag} needs --ab URL")
        return None
    refuse_credentials(ns.ab, "--ab")
    try:
        base_url = normalise_base_url(with_scheme(ns.ab), add_v1=a.endpoint_path is None)
    except ValueError as exc:
        raise UsageError(f"--ab: {exc}") from None
    target = replace(
        a,
        base_url=base_url,
        model=ns.ab_model,
        api_key=os.environ.get(AB_KEY_ENV) or None,
        headers=headers_from(ns.ab_header, "--ab-header"),
        demo=False,
        trust_env=ns.trust_env,  # A's is off for the demo simulator; B is never it
    )
    if ns.ab is not None and ns.ray is not None:
        raise UsageError("--ab runs its two sides' workers here: drop --ray")
    return AbConfig(target=target, mode=ns.ab_mode, threshold_pct=ns.ab_threshold, block_s=ns.ab_block)
