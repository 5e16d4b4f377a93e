"""`tokentop help [TOPIC]`: the manual's listing, or one page, from the manual shipped in the package."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class HelpConfig:
    """The page asked for (None: the listing)."""

    topic: str | None = None


def add_help_args(p: argparse.ArgumentParser) -> None:
    """The optional TOPIC."""
    p.add_argument("topic", nargs="?", help="a page (e.g. numbers, keys, bench); none lists them")


def help_config(ns: argparse.Namespace) -> HelpConfig:
    """TOPIC, if given."""
    return HelpConfig(topic=ns.topic)


def run(config: HelpConfig) -> int:
    """Print the listing or the page; an unknown page is one line naming the nearest, exit 2."""
    from tui import manual

    topic = config.topic
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
