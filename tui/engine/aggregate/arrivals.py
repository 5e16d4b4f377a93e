"""The workers' arrival counts on the face: the fold of each `Arrivals` into the levels' timelines and binned
logs (`tui.engine.aggregate.binned_log`) and into the rolling series.

What arrived counts whether its stream has finished or not, so a level and the rolling views fill from the
first token, however long the answers."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

import numpy as np

from tui.engine.aggregate.levels import LevelAgg
from tui.engine.aggregate.series import MetricSeries, Timeline
from tui.engine.wire import ARRIVAL_BUCKET_NS, Arrivals


def fold_arrivals(
    batch_t_ns: int,
    arrivals: Sequence[Arrivals],
    levels: Mapping[int, LevelAgg],
    series: MutableMapping[str, MetricSeries],
) -> None:
    """Add one batch's arrivals to their levels (tokens by arrival time, TTFTs, gaps) and to the rolling
    TTFT and chunk-ITL series (stamped with the batch: they arrived since the worker's last)."""
    for a in arrivals:
        ttft_bins = np.frombuffer(a.ttft_bins, dtype=np.int64)
        ttft_counts = np.frombuffer(a.ttft_counts, dtype=np.int64)
        gap_bins = np.frombuffer(a.gap_bins, dtype=np.int64)
        gap_counts = np.frombuffer(a.gap_counts, dtype=np.int64)
        series["ttft"].add_counts(batch_t_ns, ttft_bins, ttft_counts)
        series["itl_chunk"].add_counts(batch_t_ns, gap_bins, gap_counts)
        lv = levels.get(a.level_id)
        if lv is None:
            continue
        lv.version += 1
        buckets = np.frombuffer(a.token_buckets, dtype=np.int64)
        tokens = np.frombuffer(a.token_counts, dtype=np.int64).astype(np.float64)
        lv.timeline.add(Timeline.TOK, buckets * ARRIVAL_BUCKET_NS + ARRIVAL_BUCKET_NS // 2, tokens)
        lv.ttft_log.add(batch_t_ns, ttft_bins, ttft_counts)
        lv.gap_log.add(batch_t_ns, gap_bins, gap_counts)
        lv.first_tokens(batch_t_ns, int(ttft_counts.sum()))
