"""What a dataset file holds once parsed, and the one error every dataset source raises.

Shared by the per-format parsers (`jsonl`, `sharegpt`, `plain_text`) and `dataset`, which picks among them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.engine.workload.protocol import Message


class DatasetError(Exception):
    """A dataset that cannot be used: one line naming the file and, where there is one, the line."""

    def __init__(self, path: str, message: str, line: int | None = None) -> None:
        where = path if line is None else f"{path} line {line}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


@dataclass(frozen=True, slots=True)
class Entry:
    """One prompt of a dataset: exactly one of ``prompt`` and ``messages``."""

    prompt: str | None = None
    messages: tuple[Message, ...] | None = None
    output_tokens: int | None = None
    """The output length the file asks for (JSONL ``output_tokens``/``max_tokens``, ShareGPT's reply length
    in words); None: the workload's ``--osl``."""

    @property
    def text(self) -> str:
        """All the entry's text (a chat entry's messages joined), for a word-count estimate."""
        if self.prompt is not None:
            return self.prompt
        return "\n".join(m.content for m in self.messages or ())


def line_of(text: str | bytes, pos: int) -> int:
    """The 1-based line of character (or byte) offset ``pos``."""
    newline: str | bytes = "\n" if isinstance(text, str) else b"\n"
    return text.count(newline, 0, max(0, pos)) + 1  # type: ignore[arg-type]
