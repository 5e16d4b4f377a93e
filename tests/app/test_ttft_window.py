"""The TTFT pane in a closed loop of answers longer than its window: the window holds no first token, the
run does, and the pane shows the run's (saying so) rather than `n 0`."""

from __future__ import annotations

from tests.support.frozen import snapshot
from tui.app.widgets.latency import ttft_view
from tui.engine.snapshot import Histogram


def test_an_empty_window_shows_the_whole_runs_first_tokens_and_says_so() -> None:
    full = snapshot()
    whole = full.ttft_hist[None]
    snap = snapshot(ttft_hist={**full.ttft_hist, 10.0: Histogram(edges_ms=whole.edges_ms)})
    title, hist = ttft_view(snap, 10.0)
    assert hist is whole and hist.stats.n > 0
    assert title == "TTFT · whole run (none in the last 10 s)"


def test_a_window_with_first_tokens_or_a_run_without_any_is_shown_as_it_is() -> None:
    full = snapshot()
    assert ttft_view(full, 10.0) == ("TTFT · last 10 s", full.ttft_hist[10.0])
    empty = Histogram(edges_ms=full.ttft_hist[None].edges_ms)
    none_yet = snapshot(ttft_hist={w: empty for w in full.ttft_hist})
    assert ttft_view(none_yet, 10.0) == ("TTFT · last 10 s", empty)
