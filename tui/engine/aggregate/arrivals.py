"""The workers' arrival counts on the face: the fold of each `Arrivals` into the levels' timelines and binned
logs (`tui.engine.aggregate.binned_log`) and into the rolling series.

What arrived counts whether its stream has finished or not, so a level and the rolling views fill from the
first token, however long the answers. Many batches fold at once (`tui.engine.aggregate.pending`): each
series and level timeline takes all of theirs in one call, in the order they came."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

import numpy as np

from tui.engine.aggregate import metrics as m
from tui.engine.aggregate.levels import LevelAgg
from tui.engine.aggregate.series import MetricSeries, Timeline
from tui.engine.wire import ARRIVAL_BUCKET_NS, Arrivals


def fold_arrivals(
    batches: Sequence[tuple[int, Sequence[Arrivals]]],
    levels: Mapping[int, LevelAgg],
    series: MutableMapping[str, MetricSeries],
) -> None:
    """Add batches' arrivals (each with its batch's time) to their levels (tokens by arrival time, TTFTs,
    gaps) and to the rolling TTFT and chunk-ITL series (stamped with their batch: they arrived since the
    worker's last)."""
    ttft = _Samples()
    gaps = _Samples()
    tokens: dict[int, tuple[list[bytes], list[bytes]]] = {}
    for batch_t_ns, arrivals in batches:
        for a in arrivals:
            ttft_bins = np.frombuffer(a.ttft_bins, dtype=np.int64)
            ttft_counts = np.frombuffer(a.ttft_counts, dtype=np.int64)
            gap_bins = np.frombuffer(a.gap_bins, dtype=np.int64)
            gap_counts = np.frombuffer(a.gap_counts, dtype=np.int64)
            ttft.add(batch_t_ns, ttft_bins, ttft_counts)
            gaps.add(batch_t_ns, gap_bins, gap_counts)
            lv = levels.get(a.level_id)
            if lv is None:
                continue
            lv.version += 1
            buckets, counts = tokens.setdefault(a.level_id, ([], []))
            buckets.append(a.token_buckets)
            counts.append(a.token_counts)
            lv.ttft_log.add(batch_t_ns, ttft_bins, ttft_counts)
            lv.gap_log.add(batch_t_ns, gap_bins, gap_counts)
            lv.first_tokens(batch_t_ns, int(ttft_counts.sum()))
    ttft.into(series["ttft"])
    gaps.into(series["itl_chunk"])
    for level_id, (buckets, counts) in tokens.items():
        at = np.frombuffer(b"".join(buckets), dtype=np.int64)
        n = np.frombuffer(b"".join(counts), dtype=np.int64).astype(np.float64)
        levels[level_id].timeline.add(Timeline.TOK, at * ARRIVAL_BUCKET_NS + ARRIVAL_BUCKET_NS // 2, n)


class _Samples:
    """Binned samples of many batches, each standing at its bin's middle and stamped with its batch."""

    def __init__(self) -> None:
        self.t: list[int] = []
        self.n: list[int] = []
        self.bins: list[np.ndarray] = []

    def add(self, t_ns: int, bins: np.ndarray, counts: np.ndarray) -> None:
        if counts.size:
            self.t.append(t_ns)
            self.n.append(int(counts.sum()))
            self.bins.append(np.repeat(bins, counts))

    def into(self, target: MetricSeries) -> None:
        """Add them to ``target`` in one call, in the order they came."""
        if not self.bins or not sum(self.n):
            return
        t = np.repeat(np.asarray(self.t, dtype=np.int64), self.n)
        bins = np.concatenate(self.bins)
        target.add(t, m.FINE_CENTERS_MS[bins], bins)
