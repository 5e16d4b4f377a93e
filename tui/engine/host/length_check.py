"""A notice, once per level, when a settled level's mean ISL or OSL is more than 2 tokens off what was asked
(OSL only when it was pinned with ``ignore_eos``): a server that streams 4 tokens for ``--osl 128`` must not
pass without a word. The test itself is `length_mismatch`; this remembers which levels have had their line."""

from __future__ import annotations

from collections.abc import Sequence

from tui.engine.aggregate.levels import length_mismatch
from tui.engine.config import WorkloadConfig
from tui.engine.host.config_record import asked_isl, asked_osl
from tui.engine.snapshot import LevelView


class LengthCheck:
    """Called with each snapshot's levels; says each level's mismatch at most once."""

    def __init__(self) -> None:
        self._flagged: set[int] = set()

    def notices(self, levels: Sequence[LevelView], workload: WorkloadConfig) -> list[str]:
        """The new lines for ``levels``: one for each level off what ``workload`` asked, not said before."""
        lines = []
        for view in levels:
            if view.level_id in self._flagged:
                continue
            message = length_mismatch(view, asked_isl(workload), asked_osl(workload))
            if message is not None:
                self._flagged.add(view.level_id)
                lines.append(message)
        return lines
