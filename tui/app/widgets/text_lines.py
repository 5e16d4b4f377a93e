"""A widget that shows a Rich Text through the line API, rendered once per change."""

from __future__ import annotations

from rich.segment import Segment
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
                console = self.app.console
                options = console.options.update(width=width, height=None, no_wrap=False, overflow="fold")
                lines = console.render_lines(self.text, options, style=base, pad=True)
                self._strips = [Strip(line, width) for line in lines] if self.text.plain else []
            self._strips_key = key
        return self._strips

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._strips_for(width))

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        strips = self._strips_for(width)
        if y < len(strips):
            return strips[y]
        return Strip([Segment(" " * width, self.rich_style)], width)
