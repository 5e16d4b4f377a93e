"""The manual: short Markdown pages shipped inside the package, so `tokentop help TOPIC` and the app's `?`
show the same text as the installed code, whatever version that is."""

from __future__ import annotations

import difflib
import re
import shutil
import textwrap
from dataclasses import dataclass
from importlib import resources

READING_ORDER: tuple[str, ...] = (
    "numbers",
    "keys",
    "app",
    "live",
    "bench",
    "workloads",
    "traces",
    "server",
    "results",
    "exports",
    "sessions",
    "ab",
    "network",
    "reliability",
    "watch",
    "monitoring",
    "simulator",
    "ray",
    "performance",
    "develop",
)
"""Pages in the order a newcomer reads them; a page not named here comes after, by name."""

SENTENCE_END = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<!vs\.)(?<=[.!?])\s+")
"""Where a sentence ends: a stop and a space, but not an abbreviation's ("e.g. the" runs on)."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page: its topic (the file name without `.md`), its title (the first heading) and its text."""

    topic: str
    title: str
    text: str

    @property
    def summary(self) -> str:
        """The first sentence of the first paragraph, as the page writes it: what `tokentop help` lists
        beside the topic, so a page's opening sentence is its summary and no page carries a second one."""
        paragraph: list[str] = []
        for line in self.text.splitlines()[1:]:
            if line.strip():
                paragraph.append(line.strip())
            elif paragraph:
                break
        return SENTENCE_END.split(" ".join(paragraph), maxsplit=1)[0]


def _rank(topic: str) -> tuple[int, str]:
    return (READING_ORDER.index(topic) if topic in READING_ORDER else len(READING_ORDER), topic)


def pages() -> list[Page]:
    """Every page of the manual, in reading order."""
    found = []
    for entry in resources.files(__package__).iterdir():
        if entry.name.endswith(".md"):
            text = entry.read_text(encoding="utf-8")
            title = text.splitlines()[0].lstrip("# ").strip() if text else entry.name
            found.append(Page(entry.name.removesuffix(".md"), title, text))
    return sorted(found, key=lambda p: _rank(p.topic))


def page(topic: str) -> Page | None:
    """The page on `topic` (its exact name, or the one page whose name starts with it)."""
    everything = {p.topic: p for p in pages()}
    if topic in everything:
        return everything[topic]
    starting = [p for name, p in everything.items() if name.startswith(topic)]
    return starting[0] if len(starting) == 1 else None


def nearest(topic: str) -> str | None:
    """The topic a mistyped one most likely meant, for the error line."""
    close = difflib.get_close_matches(topic, [p.topic for p in pages()], n=1)
    return close[0] if close else None


def listing(width: int | None = None) -> str:
    """What `tokentop help` prints: every topic with its one-line summary, wrapped under itself to
    ``width`` columns (default: the terminal's)."""
    rows = pages()
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns
    column = 2 + max((len(p.topic) for p in rows), default=0) + 2
    lines = ["The manual: `tokentop help TOPIC` prints a page (the app's `?` shows the same).", ""]
    for p in rows:
        wrapped = textwrap.wrap(p.summary, width=max(width - column, 30)) or [""]
        lines.append(f"  {p.topic:<{column - 4}}  {wrapped[0]}")
        lines += [" " * column + rest for rest in wrapped[1:]]
    return "\n".join(lines) + "\n"
