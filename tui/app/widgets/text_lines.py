"""A widget that shows a Rich Text through the line API, rendered once per change."""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

Span = tuple[str, Style | None]
"""A run of text and its style (None: the widget's base style)."""
SpanLines = list[list[Span]]
"""Lines of spans: text that is rebuilt every tick, without a Rich `Text` in between."""


def spans_to_text(lines: SpanLines) -> Text:
    """The same lines as a Rich `Text` (for wrapping, and for tests that read ``.plain``)."""
    text = Text()
    for i, line in enumerate(lines):
        if i:
            text.append("\n")
        for chunk, style in line:
            text.append(chunk, style)
    return text


class TextLines(Widget):
    """For text that changes every tick (status, gauges, stats lines): the Text is turned into strips once
    per change with Rich, skipping Textual's Content conversion and re-wrapping on each paint, which cost
    ~1 ms per small widget per tick. Wraps to the width; height follows the number of lines.

    `set_lines` takes lines of (text, style) spans instead: when every line fits the width they become
    strips directly, skipping Rich's Text building, splitting and rendering (a third of the status line's
    cost per tick); a line too long for the width is wrapped through Rich as usual."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.text = Text()
        self._lines: SpanLines | None = None
        self._strips: list[Strip] | None = None
        self._strips_key: object = None

    def set_text(self, text: Text) -> None:
        if self._lines is None and text == self.text:
            return
        self._lines = None
        self._replace(text)

    def set_lines(self, lines: SpanLines) -> None:
        if lines == self._lines:
            return
        self._lines = lines
        self._replace(None)

    @property
    def plain(self) -> str:
        """The text shown, without styles."""
        if self._lines is not None:
            return "\n".join("".join(chunk for chunk, _ in line) for line in self._lines)
        return self.text.plain

    def _replace(self, text: Text | None) -> None:
        old_rows = len(self._strips) if self._strips is not None else -1
        self.text = text if text is not None else Text()
        self._strips = None
        self.refresh(layout=old_rows != len(self._strips_for(self.content_size.width)))

    def restyle(self) -> None:
        """After a theme change: the base style is part of every strip."""
        self._strips = None
        self.refresh()

    def _strips_for(self, width: int) -> list[Strip]:
        base = self.rich_style
        key = (width, base)
        if self._strips is None or key != self._strips_key:
            if width <= 0:
                self._strips = []
            elif self._lines is not None:
                self._strips = self._build_lines(self._lines, width, base)
            else:
                self._strips = self._build(width, base) if self.text.plain else []
            self._strips_key = key
        return self._strips

    def _build_lines(self, lines: SpanLines, width: int, base: Style) -> list[Strip]:
        strips = []
        for line in lines:
            segments = [Segment(chunk, base + style if style else base) for chunk, style in line if chunk]
            if sum(cell_len(chunk) for chunk, _ in line) > width:
                self.text = spans_to_text(lines)  # rare: a narrow terminal or a long warning
                return self._build(width, base)
            strips.append(Strip(segments).adjust_cell_length(width, base))
        return strips

    def _build(self, width: int, base: Style) -> list[Strip]:
        console = self.app.console
        lines = self.text.split("\n")
        if all(line.cell_len <= width for line in lines):
            # The usual case, and twice as fast as wrapping: render each line as it is.
            return [
                Strip(
                    [
                        Segment(seg.text, base + seg.style if seg.style else base)
                        for seg in line.render(console)
                    ]
                ).adjust_cell_length(width, base)
                for line in lines
            ]
        options = console.options.update(width=width, height=None, no_wrap=False, overflow="fold")
        return [Strip(line, width) for line in console.render_lines(self.text, options, style=base, pad=True)]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._strips_for(width))

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        strips = self._strips_for(width)
        if y < len(strips):
            return strips[y]
        return Strip([Segment(" " * width, self.rich_style)], width)
