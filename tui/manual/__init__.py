"""The manual: short Markdown pages shipped inside the package, so `tokentop help TOPIC` and the app's `?`
show the same text as the installed code, whatever version that is."""

from __future__ import annotations

import difflib
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
    "network",
    "reliability",
    "watch",
    "simulator",
    "ray",
    "performance",
    "develop",
)
"""Pages in the order a newcomer reads them; a page not named here comes after, by name."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page: its topic (the file name without `.md`), its title (the first heading) and its text."""

    topic: str
    title: str
    text: str

    @property
    def summary(self) -> str:
        """The first sentence under the title: what `tokentop help` lists beside the topic."""
        for line in self.text.splitlines()[1:]:
            if line.strip():
                first = line.strip()
                return first.split(". ")[0].rstrip(".") + "."
        return ""


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


def listing() -> str:
    """What `tokentop help` prints: every topic with its one-line summary."""
    rows = pages()
    width = max((len(p.topic) for p in rows), default=0)
    lines = [
        "tokentop's manual: `tokentop help TOPIC` prints a page (the app's `?` shows the same pages).",
        "",
    ]
    lines += [f"  {p.topic:<{width}}  {p.title}" for p in rows]
    return "\n".join(lines) + "\n"
