"""What every engine hosted in the face's process answers the same way, from its `Store`, its `/metrics`
scrape and its stopped flag: the load engine (`EngineHandle`) and the watch-only one (`WatchEngine`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tui.engine.aggregate.store import Store
from tui.engine.config import LoadTarget, TargetConfig
from tui.engine.host.server_scrape import ServerScrape
from tui.engine.redact import display_url
from tui.engine.snapshot import Snapshot

if TYPE_CHECKING:
    from tui.engine.results.model import Document
    from tui.engine.server_metrics import ServerView


class EngineBase:
    """A part of `tui.engine.api.Engine`; a subclass sets these five attributes in its ``__init__``."""

    target: TargetConfig
    _load: LoadTarget
    _store: Store
    _stopped: bool
    _scrape: ServerScrape

    @property
    def load(self) -> LoadTarget:
        """The current target."""
        return self._load

    @property
    def t0_ns(self) -> int:
        """The run's zero (``perf_counter_ns``); snapshot times in seconds are relative to it."""
        return self._store.t0_ns

    @property
    def stopped(self) -> bool:
        """True once `stop` has finished."""
        return self._stopped

    def server_view(self) -> ServerView | None:
        """The server's own signals as last scraped from its ``/metrics``, or None when not scraping (off,
        or not started)."""
        return self._scrape.latest()

    def _store_snapshot(
        self, now_ns: int, *, model: str, demo: bool, level_id: int, fatal: str | None
    ) -> Snapshot:
        """The store's snapshot with the header every engine fills from its target the same way (the URL
        shown without credentials)."""
        return self._store.snapshot(
            now_ns,
            base_url=display_url(self.target.base_url),
            model=model,
            endpoint=self.target.endpoint,
            demo=demo,
            load=self._load,
            level_id=level_id,
            fatal=fatal,
        )

    def results(self, *, interrupted: str | None = None) -> Document:
        """The results document; each engine builds its own."""
        raise NotImplementedError

    def write_results(self, path: Path, *, interrupted: str | None = None) -> Path:
        """Write `results` atomically (a crash never leaves half a file); ``interrupted`` as in `results`."""
        from tui.engine.results.files import write_results

        return write_results(self.results(interrupted=interrupted), Path(path))
