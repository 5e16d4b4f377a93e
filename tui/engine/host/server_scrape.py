"""One run's scrape of the server's ``/metrics``: the poller thread and the log it appends to, opened and
closed together, so the load engine and `tokentop watch` start and stop them the same way."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from tui.engine.config import EngineOptions, TargetConfig

if TYPE_CHECKING:
    from tui.engine.host.canary import Canary
    from tui.engine.records import RequestRecord
    from tui.engine.server_metrics import ServerMetricsPoller, ServerView
    from tui.engine.server_metrics.level_figures import LevelFigures, LevelSpan
    from tui.engine.snapshot import LevelView

SERVER_HISTORY = 3600
"""Scrapes kept: an hour at the default 1 Hz, for the live figures, the histories and the running level's
server figures (a settled level's are kept apart, see `level_summaries`; the --server-metrics-log keeps
everything)."""


class ServerScrape:
    """Scrapes on its own thread of the face's process: a slow or missing endpoint never slows the workers,
    which stamp tokens, nor the UI, which only reads the published view. The canary user (`--canary-rate`)
    runs beside it, on a thread of its own: its figures join the view and each level's summary."""

    def __init__(self) -> None:
        self._poller: ServerMetricsPoller | None = None
        self._log: IO[bytes] | None = None
        self._summaries: LevelFigures[dict[str, Any]] | None = None
        self.canary: Canary | None = None

    @property
    def started(self) -> bool:
        """True once `start` has run (also after `stop`: a scrape is started once)."""
        return self._poller is not None

    def start(
        self,
        target: TargetConfig,
        options: EngineOptions,
        *,
        on_notice: Callable[[str], None],
        on_canary_record: Callable[[RequestRecord], None] | None = None,
        canary_words: int = 32,
        on_scrape: Callable[[int, str, Mapping[str, float]], None] | None = None,
    ) -> None:
        """Open ``options.server_metrics_log`` (if any) and start polling (the first scrape is immediate);
        the poller's one-line notices (metrics missing, log unwritable) go to ``on_notice``, and each
        scrape's time, body and GPU gauges to ``on_scrape`` (a session records them). With
        ``options.canary_rate``, start the canary too (prompts of ``canary_words`` words), each finished
        canary request's record going to ``on_canary_record`` (with ``options.trace_key``, each canary request
        carries a ``traceparent``, as the load's do)."""
        if self._poller is not None:
            return
        from tui.engine.server_metrics.poller import poller_for

        if options.canary_rate:
            from tui.engine.host.canary import Canary

            self.canary = Canary(
                target,
                options.canary_rate,
                words=canary_words,
                on_record=on_canary_record,
                transport=options.transport,
                trace_key=options.trace_key,
            ).start()

        if options.server_metrics_log is not None:
            self._log = open(options.server_metrics_log, "ab")  # noqa: SIM115 - closed in stop()
        self._poller = poller_for(
            target, options, on_notice=on_notice, log=self._log, history=SERVER_HISTORY, on_scrape=on_scrape
        ).start()

    def attach(self, poller: ServerMetricsPoller) -> None:
        """Read views from ``poller``, which someone else feeds (a replay's `ServerMetricsPoller.take`)."""
        self._poller = poller

    def latest(self) -> ServerView | None:
        """The view as last scraped (with the canary's live figures), or None before `start`."""
        if self._poller is None:
            return None
        view = self._poller.latest()
        if self.canary is not None:
            from dataclasses import replace

            view = replace(view, canary=self.canary.figures())
        return view

    def summary(self, view: ServerView, t_from_ns: int, t_to_ns: int) -> dict[str, Any]:
        """`ServerView.level_summary` over the window, with the canary's figures there (`canary`)."""
        out = view.level_summary(t_from_ns, t_to_ns)
        if self.canary is not None:
            out["canary"] = self.canary.level(t_from_ns, t_to_ns)
        return out

    def level_summaries(self, view: ServerView, spans: list[LevelSpan]) -> dict[int, dict[str, Any]]:
        """Each level's `ServerView.level_summary` over its span, by level id; a level's is kept once it
        has settled and a scrape after it came in, so it outlives the ring (`LevelFigures`)."""
        return self._level_figures().of(view, spans)

    def keep_level_summaries(self, levels: Sequence[LevelView], t0_ns: int, now_ns: int) -> None:
        """Freeze the summary of each settled level whose scrapes are all in (`LevelFigures.keep`): called
        on every snapshot, it costs a look-up per settled level once they are kept."""
        view = self.latest()
        if view is not None and view.readings:
            from tui.engine.server_metrics.level_figures import level_spans_ns

            settled = [lv for lv in levels if lv.settled]
            self._level_figures().keep(view, level_spans_ns(settled, t0_ns, now_ns))

    def _level_figures(self) -> LevelFigures[dict[str, Any]]:
        if self._summaries is None:
            from tui.engine.server_metrics.level_figures import LevelFigures

            self._summaries = LevelFigures(self.summary)
        return self._summaries

    def stop(self) -> None:
        """Stop polling and the canary (the last view stays readable) and close the log. Idempotent."""
        if self.canary is not None:
            self.canary.stop()
        if self._poller is not None:
            self._poller.stop()
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None
