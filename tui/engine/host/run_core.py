"""What every engine keeps alike: one run's store, its server scrape, the checks on its levels, and the
results made from them. `EngineHandle`, `WatchEngine` and `PlaybackEngine` each hold a `RunCore` as ``core``
and delegate to it; they differ only in what feeds the store (workers, nothing, a recording).

The `Engine` members that only read the core are `CoreRead`s written once here: an engine names the ones it
answers so (``load, t0_ns, server_view = LOAD, T0_NS, SERVER_VIEW``; all six: `RUN_READS`) rather than
repeating their bodies."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar, overload

from tui.engine.aggregate.store import Store
from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.control.checks import CacheCheck, LengthCheck
from tui.engine.host.server_scrape import ServerScrape
from tui.engine.redact import display_url

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tui.engine.results.build import RunInfo
    from tui.engine.results.level import CacheReset
    from tui.engine.results.model import Document, Results
    from tui.engine.server_metrics import ServerView
    from tui.engine.snapshot import LevelView, RampVerdict, Snapshot

T = TypeVar("T")


def new_store(options: EngineOptions, t0_ns: int, workers: int, *, series_cap: int | None = None) -> Store:
    """An empty store for a run from ``t0_ns`` (``perf_counter_ns``) with the options' thresholds."""
    o = options
    return Store(
        t0_ns,
        workers,
        slo_ttft_ms=o.slo_ttft_ms,
        slo_tpot_ms=o.slo_tpot_ms,
        slo_e2e_ms=o.slo_e2e_ms,
        lag_threshold_ms=o.lag_threshold_ms,
        cpu_threshold=o.cpu_threshold,
        max_lanes=o.max_lanes,
        series_cap=series_cap,
    )


def write_results(results: Document, path: Path) -> Path:
    """Write ``results`` atomically (a crash never leaves half a file)."""
    from tui.engine.results.files import write_results as write

    return write(results, Path(path))


class RunCore:
    """One run's state as every engine holds it. Not locked: an engine with threads holds its own lock."""

    def __init__(
        self, target: TargetConfig, options: EngineOptions, store: Store, load: LoadTarget, *, workers: int
    ) -> None:
        self.target = target
        self.options = options
        self.store = store
        self.load = load
        """The current target."""
        self.workers = workers
        self.scrape = ServerScrape()
        self.lengths = LengthCheck()
        self.cache = CacheCheck()
        self.level_id = 0
        self.model = target.model or ""
        """The model in use ("" until resolved)."""
        self.fatal: str | None = None
        """The engine's own reason it cannot go on; `fatal_line` adds the store's."""
        self.started_at: float | None = None
        """Wall-clock start (``time.time()``), for results."""
        self.resets: dict[int, CacheReset] = {}
        """The prefix cache resets asked for, by the level each came before (`Level.cache_reset`)."""

    def fatal_line(self) -> str | None:
        """Why the engine cannot go on (one line), or None."""
        return self.fatal or self.store.fatal

    def snapshot(self, now_ns: int, workload: WorkloadConfig | None, *, cache: bool = True) -> Snapshot:
        """The store's state now with the run's header fields; with a ``workload``, a level off its asked
        lengths (and, with ``cache``, prompts served from the prefix cache) gets its notice first, and with
        ``cache`` a level served from a warm cache is marked (`LevelView.warm_cache`)."""
        snap = self.store.snapshot(
            now_ns,
            base_url=display_url(self.target.base_url),
            model=self.model,
            endpoint=self.target.endpoint,
            demo=self.target.demo,
            load=self.load,
            level_id=self.level_id,
            fatal=self.fatal,
        )
        levels = snap.levels
        if workload is not None:
            self.flag_levels(levels, workload, cache=cache)
            if cache and (warm := self.cache.warm(levels, workload)):
                levels = tuple(replace(lv, warm_cache=True) if lv.level_id in warm else lv for lv in levels)
        self.scrape.keep_level_summaries(levels, self.store.t0_ns, now_ns)
        return replace(
            snap,
            levels=levels,
            notices=self.store.notices_with(levels),
            recent_errors=tuple(self.store.recent_errors),
        )

    def flag_levels(
        self, levels: Sequence[LevelView], workload: WorkloadConfig, *, cache: bool = True
    ) -> None:
        """A level off its asked lengths gets one notice, and (``cache``) synthetic prompts served from the
        prefix cache one for the run (`tui.engine.control.checks`)."""
        notices = self.lengths.notices(levels, workload, outputs=self.target.endpoint != "embeddings")
        if cache:
            notices += self.cache.notices(levels, workload)
        for message in notices:
            self.store.add_notice(message)

    def run_info(self, workload: WorkloadConfig, started_at_s: float) -> RunInfo:
        """The run described as plain data for results (no secrets: see `config_record.run_info`)."""
        from tui.engine.host.config_record import run_info

        return run_info(
            self.target,
            workload,
            self.load,
            options=self.options,
            workers=self.workers,
            model=self.model,
            started_at_s=started_at_s,
        )

    def results(
        self,
        snapshot: Callable[[], Snapshot],
        info: RunInfo,
        *,
        interrupted: str | None,
        ramp: RampVerdict | None = None,
        now_ns: int | None = None,
    ) -> Results:
        """The results document of the run so far (`tui.engine.results.collect`)."""
        from tui.engine.results.collect import collect_results

        return collect_results(
            self.store, snapshot, info, self.scrape, interrupted=interrupted, ramp=ramp, now_ns=now_ns,
            resets=self.resets,
        )  # fmt: skip


class CoreRead(Generic[T]):
    """A read-only member of an engine that reads the engine's ``core`` (a `RunCore`)."""

    def __init__(self, read: Callable[[RunCore], T]) -> None:
        self._read = read

    @overload
    def __get__(self, engine: None, owner: type) -> CoreRead[T]: ...
    @overload
    def __get__(self, engine: object, owner: type) -> T: ...
    def __get__(self, engine: object | None, owner: type) -> T | CoreRead[T]:
        if engine is None:
            return self
        core: RunCore = engine.core  # type: ignore[attr-defined]
        return self._read(core)


LOAD: CoreRead[LoadTarget] = CoreRead(lambda c: c.load)
"""The current target."""
LEVEL_ID: CoreRead[int] = CoreRead(lambda c: c.level_id)
MODEL: CoreRead[str] = CoreRead(lambda c: c.model)
FATAL: CoreRead[str | None] = CoreRead(RunCore.fatal_line)
T0_NS: CoreRead[int] = CoreRead(lambda c: c.store.t0_ns)
"""The run's zero (``perf_counter_ns``); snapshot times in seconds are relative to it."""
SERVER_VIEW: CoreRead[Callable[[], ServerView | None]] = CoreRead(lambda c: c.scrape.latest)
"""The server's signals as last scraped (or played back), or None."""
RUN_READS: tuple[
    CoreRead[LoadTarget],
    CoreRead[int],
    CoreRead[str],
    CoreRead[str | None],
    CoreRead[int],
    CoreRead[Callable[[], ServerView | None]],
] = (LOAD, LEVEL_ID, MODEL, FATAL, T0_NS, SERVER_VIEW)
"""``load, level_id, model, fatal, t0_ns, server_view``: an engine that reads all of them from its core."""
