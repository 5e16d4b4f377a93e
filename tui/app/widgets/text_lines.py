"""A widget that shows a Rich Text through the line API, rendered once per change."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget


class TextLines(Widget):
    """For text that changes every tick (status, gauges, stats lines): the Text is turned into strips once
    per change with Rich, skipping Textual's Content conversion and re-wrapping on each paint, which cost
    ~1 ms per small widget per tick. Wraps to the width; height follows the number of lines."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.text = Text()
        self._strips: list[Strip] | None = None
        self._strips_key: object = None

    def set_text(self, text: Text) -> None:
        if text == self.text:
            return
        old_rows = len(self._strips) if self._strips is not None else -1
        self.text = text
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
            else:
                self._strips = self._build(width, base) if self.text.plain else []
            self._strips_key = key
        return self._strips

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
