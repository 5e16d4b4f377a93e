"""What the store folds into its levels and rolling series only when they are read: the workers' arrivals
and the successful records, gathered batch by batch and folded together.

Folding one batch ran a few dozen numpy calls (the series' rings and histograms, the level timelines, the
records' columns), a cost per batch that grew with the workers (ten batches a second each) and was most
of the face's CPU per chunk. The store reads these aggregates only to compute its views (every
half second) or results, so it folds what has gathered then, in one go: the same calls once for every
worker's batches. Every series gets its samples in the order the batches came and every level the same
rows and counts as batch by batch; only the rolling series' running sums (their mean once the raw ring no
longer covers a window) may differ in the last bits, from adding in larger pieces.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

from tui.engine.aggregate.arrivals import fold_arrivals
from tui.engine.aggregate.levels import LevelAgg, fold_ok, ok_columns
from tui.engine.aggregate.series import MetricSeries
from tui.engine.records import RequestRecord
from tui.engine.wire import Arrivals

PENDING_CAP = 4096
"""Records and arrivals gathered before they are folded anyway (a store whose views nobody reads stays
bounded)."""


class Pending:
    """Arrivals and successful records not folded yet, in the order they came."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[int, Sequence[Arrivals]]] = []
        self.ok: list[RequestRecord] = []

    @property
    def full(self) -> bool:
        """Time to fold, whether or not anyone reads."""
        return len(self.ok) + len(self.arrivals) >= PENDING_CAP

    def __bool__(self) -> bool:
        return bool(self.ok or self.arrivals)

    def fold(self, levels: Mapping[int, LevelAgg], series: MutableMapping[str, MetricSeries]) -> None:
        """Fold everything gathered into ``levels`` and ``series``, and forget it."""
        arrivals, self.arrivals = self.arrivals, []
        ok, self.ok = self.ok, []
        if arrivals:
            fold_arrivals(arrivals, levels, series)
        if ok:
            cols = ok_columns(ok)
            fig = cols.fig
            # TTFT and chunk gaps enter the rolling series as they arrive (`fold_arrivals`), not here
            series["e2e"].add(cols.end, fig.e2e_ms)
            series["tpot"].add(cols.end, fig.tpot_ms)
            series["itl_e2e"].add(cols.end, fig.itl_e2e_ms)
            fold_ok(cols, levels)
