"""The key footer: every binding that fits the width, the most useful kept when not all of them do."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

FooterEntry = tuple[Binding, bool, str, str]
"""(binding, enabled, tooltip, key as displayed)."""


def entry_cells(key_display: str, description: str) -> int:
    """Cells one compact footer key takes: key, a space, description, and its right margin."""
    return cell_len(key_display) + 1 + cell_len(description) + 1


def fit_entries(entries: Sequence[FooterEntry], rank: Sequence[str], width: int) -> list[FooterEntry]:
    """Pure: the entries that fit ``width`` cells, in their own order. Entries are taken by usefulness:
    actions missing from ``rank`` first (a focused widget's own keys, such as a lane's `enter`), then in
    ``rank``'s order; an entry that does not fit is skipped and a later, shorter one may still fit."""

    def usefulness(index: int) -> tuple[int, int]:
        action = entries[index][0].action
        return (rank.index(action) + 1 if action in rank else 0, index)

    room = width + 1  # the last key's right margin may fall off the edge
    keep: set[int] = set()
    for index in sorted(range(len(entries)), key=usefulness):
        binding, _enabled, _tooltip, key = entries[index]
        cells = entry_cells(key, binding.description)
        if cells <= room:
            keep.add(index)
            room -= cells
    return [entry for index, entry in enumerate(entries) if index in keep]


class KeyFooter(Footer):
    """Textual's footer (compact) but choosing what it shows by width: Textual's lets keys fall off the
    right edge, which at 80 columns hid the later ones and at 160 left `s`, `t`, `p` and `ctrl+p` out
    because they had to be marked hidden to keep 80 columns readable."""

    def __init__(
        self, rank: Sequence[str], *, offered: Callable[[str], bool] = lambda _: True, id: str | None = None
    ) -> None:
        super().__init__(id=id, compact=True, show_command_palette=False)
        self.rank = tuple(rank)
        """Actions, most useful first."""
        self.offered = offered
        """Whether an action is worth a place now: a key can stay live (and say why it does nothing) while
        the footer leaves it out."""
        self._width = 0
        self._drawn: list[FooterEntry] | None = None
        """What the keys on screen were composed from (None before the bindings are ready)."""

    def entries(self) -> list[FooterEntry]:
        """The active, shown bindings, one per action, in the binding chain's order."""
        seen: set[str] = set()
        out: list[FooterEntry] = []
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen or not self.offered(binding.action):
                continue
            seen.add(binding.action)
            out.append((binding, enabled, tooltip, self.app.get_key_display(binding)))
        return out

    def shown(self) -> list[FooterEntry]:
        """What the footer shows at its current width."""
        width = self.size.width or self.app.size.width
        return fit_entries(self.entries(), self.rank, width)

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            self._drawn = None
            return
        self._drawn = self.shown()
        yield from self._keys(self._drawn)

    async def recompose(self) -> None:
        """Rebuild the keys only when what they show changed: the bindings change (and ask for a rebuild)
        several times as the app starts and on every screen push and pop, mostly to the same keys, and each
        rebuild removes, mounts and styles every key again."""
        if (
            self._bindings_ready
            and self._drawn is not None
            and self.is_attached
            and self.shown() == self._drawn
        ):
            return
        await super().recompose()

    def _keys(self, entries: Iterable[FooterEntry]) -> Iterable[FooterKey]:
        """The keys, compact like the footer. Set, not `data_bind`-ed as Textual's footer does: each binding
        adds a watcher to the footer that outlives the key, and the footer is rebuilt whenever the bindings
        change (every screen push and pop), so a long run kept every key it ever drew (~0.7 MB per `?`)."""
        for binding, enabled, tooltip, key in entries:
            footer_key = FooterKey(
                binding.key, key, binding.description, binding.action, disabled=not enabled, tooltip=tooltip
            )
            footer_key.set_reactive(FooterKey.compact, self.compact)
            footer_key.set_class(self.compact, "-compact", update=False)  # what its compact watcher does
            yield footer_key

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._width:
            self._width = event.size.width
            self.call_after_refresh(self.recompose)
