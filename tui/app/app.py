"""The live app: polls engine snapshots on a fixed tick, renders them, turns keys into load targets."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import ClassVar

from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.geometry import Size
from textual.screen import Screen

from tui.app import control, keys
from tui.app.autoload import AutoLoad
from tui.app.engine_kinds import ShowsAb, StartsInBackground
from tui.app.frames import FrameStats
from tui.app.plot_cadence import PlotCadence
from tui.app.ramp_result import RampResult, load_label
from tui.app.saving import quit_notes, save_and_say
from tui.app.settings import AppSettings
from tui.app.terminal import HangUpSafeDriver
from tui.app.themes import APP_VARIABLE_DEFAULTS
from tui.app.views import ALL_ON_SCREEN, VIEWS, body, is_compact, next_view, set_layout
from tui.app.widgets.curve import ThroughputCurve
from tui.app.widgets.detail import RequestDetailScreen
from tui.app.widgets.errors import ErrorsPane
from tui.app.widgets.footer import KeyFooter
from tui.app.widgets.help import HelpScreen
from tui.app.widgets.latency import LatencyHistogram
from tui.app.widgets.level_table import LevelTable, ServerMeans
from tui.app.widgets.server_pane import ServerPane
from tui.app.widgets.status import FatalBanner, StatusBar, UiState, fatal_hint
from tui.app.widgets.streams import StreamLanes
from tui.engine.ab.pair import AbView
from tui.engine.api import Engine
from tui.engine.config import LoadTarget
from tui.engine.results.ab import AbLevel
from tui.engine.snapshot import ITL_CONVENTIONS, WINDOWS_S, ItlConvention, LaneView, LevelView, Snapshot

GC_MIDDLE_EVERY = 3
"""The app collects its middle generation every this many young collections (Python's default: 10)."""


class TokentopApp(App[int]):
    """`top` for an inference server. Renders `Snapshot`s only; keys become `LoadTarget`s."""

    CSS_PATH = "tokentop.tcss"
    TITLE = "tokentop"
    AUTO_FOCUS = None  # up/down belong to the load until the user tabs into the lanes

    BINDINGS: ClassVar[list[BindingType]] = keys.BINDINGS
    FOOTER_RANK: ClassVar[tuple[str, ...]] = keys.FOOTER_RANK

    TABLE_EVERY_TICKS = 5
    """The levels table takes new numbers at most every 5 ticks (2 Hz at 10 Hz); plots have their own
    cadence (`PlotPane.every_ticks`), and a tick builds at most one of them, never on a table tick."""

    def __init__(self, engine: Engine, settings: AppSettings) -> None:
        super().__init__()
        self.engine = engine
        self.settings = settings
        self.watch_only = settings.watch_only
        """`tokentop watch`: no load; only the server pane (and the status line) are shown, load keys off."""
        self._server_means = ServerMeans()
        self.output = settings.output
        self.requests_log = settings.requests_log
        self.save_dir = settings.save_dir or Path.cwd()
        self.tick_s = settings.tick_s
        self._clock_ns = settings.clock_ns
        self._cpu_ns = settings.cpu_clock_ns
        self._freeze_gc = settings.freeze_gc
        for each in settings.themes.values():
            self.register_theme(each)
        self._theme_names = list(settings.themes)
        self._initial_theme = settings.theme
        self.frame_stats = FrameStats()
        """Own work per tick; shown in the status line and read by the performance tests."""
        self.window_s: float | None = WINDOWS_S[0]
        self.convention: ItlConvention = ITL_CONVENTIONS[0]
        self.view = VIEWS[0]
        self._compact = False
        """Whether the small layout is in force (set from the latest size, see `_apply_layout`)."""
        self.quit_notes: list[str] = []
        """Lines for the terminal after the app closes (where results went)."""
        self._target = LoadTarget()
        self._snap: Snapshot | None = None
        self._ticks = 0
        self.auto_load = AutoLoad(
            settings.schedule,
            slo_ttft_ms=settings.slo_ttft_ms,
            slo_tpot_ms=settings.slo_tpot_ms,
            slo_e2e_ms=settings.slo_e2e_ms,
            slo_target=settings.slo_target,
            set_target=partial(self.set_target, from_ramp=True),
            notify=self.notify,
            record_ramp=lambda verdict: self.engine.record_ramp(verdict),
            on_result=self._show_ramp_result,
        )
        """The schedule and the `a` ramp: the load the app sets by itself."""
        self._knee_ready = False
        """Whether `k` has a load to go to (the footer shows it then)."""
        self._stopped_at_s: float | None = None
        """The run time when a snapshot first carried a fatal reason (the status clock stops there)."""
        self._started = not isinstance(engine, StartsInBackground)
        """False while the engine is still asking the server for /models (the status line says so)."""
        # The panes, held directly: a DOM query per widget per tick costs more than the update itself.
        self._fatal = FatalBanner(id="fatal")
        self._status = StatusBar(id="status")
        self._lanes = StreamLanes(id="lanes")
        self._curve = ThroughputCurve(id="curve")
        self._ttft = LatencyHistogram("ttft", id="ttft")
        self._itl = LatencyHistogram("itl", id="itl")
        self._table = LevelTable(id="levels")
        self._errors = ErrorsPane(id="errors")
        self._server = ServerPane(id="server")
        self._table.cost_per_hour = settings.cost_per_hour
        if (baseline := settings.baseline) is not None:
            self._curve.baseline = baseline.points
            self._table.baseline = baseline.level_for
        self._plots = PlotCadence((self._curve, self._ttft, self._itl), threaded=settings.plot_thread)
        self._pair = engine if isinstance(engine, ShowsAb) else None
        """``--ab``: the engine over both endpoints; the curve, lanes, table and server pane show B too."""
        self._ab: AbView | None = None
        if self._pair is not None:
            self._curve.baseline, self._curve.names = self._b_points, ("A", "B")
            self._table.ab = self._ab_level
            self._server.side = "A"

    def get_driver_class(self) -> type[Driver]:
        driver = super().get_driver_class()
        return HangUpSafeDriver if driver is LinuxDriver else driver

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_VARIABLE_DEFAULTS)

    def compose(self) -> ComposeResult:
        # The layout's classes on the screen before its panes are styled, not after (a second styling pass).
        self._apply_layout(self.size)
        yield self._fatal
        yield self._status
        yield from body(
            top=(self._lanes, self._curve),
            mid=(self._ttft, self._itl),
            bottom=(self._table, self._server, self._errors),
        )
        yield KeyFooter(self.FOOTER_RANK, offered=self._footer_offers)

    def on_mount(self) -> None:
        self.theme = self._initial_theme
        self.theme_changed_signal.subscribe(self, lambda _theme: self.call_after_refresh(self._redraw_plots))
        self._target = self.engine.load
        self._lanes.border_title = "token streams"
        self._apply_layout(self.size)
        self.poll()
        # Plots and the table need their sizes, known after the first layout.
        self.call_after_refresh(self.poll, force=True)
        if self._freeze_gc:
            # Everything alive after start-up (Textual, numpy, the DOM) is moved out of the collector's
            # sight: a full collection over it took ~40 ms, a visible stutter, and none of it is garbage.
            self.call_after_refresh(gc.freeze)
            # Textual's strips cache themselves (a cycle per painted strip, ~3,000 per 10 s), so the app
            # makes real garbage; middle-generation passes every 3 young ones instead of 10 are half as long
            # (~1.1 vs ~2.1 ms) and kept the UI's p99 tick 0.4-0.6 ms lower in four alternating tmux runs.
            gc.set_threshold(700, GC_MIDDLE_EVERY, 10)
        self.set_interval(self.tick_s, self.poll)  # Textual timers skip ticks that came late

    def on_unmount(self) -> None:
        self._plots.shutdown()

    def on_resize(self, event: events.Resize) -> None:
        # The event's size, not `self.size`: this handler runs before App's own, which stores the new size.
        self._apply_layout(event.size)

    # --- the tick ---------------------------------------------------------------------------------

    def poll(self, *, force: bool = False) -> None:
        """One tick: read a snapshot, update the panes that changed, maybe rebuild one plot."""
        start = self._cpu_ns()
        try:
            snap = self.engine.snapshot()
        except Exception as exc:  # a dead engine must not take the UI down with a traceback
            self._fatal.show(f"cannot read the engine: {exc}")
            return
        fetched = self._cpu_ns()
        self._ticks += 1
        if not self._started and isinstance(self.engine, StartsInBackground):
            self._started = self.engine.wait_ready(0.0)
        fresh = force or self._snap is None or snap.seq != self._snap.seq
        if self._pair is not None:
            ab = self._pair.ab_view()
            fresh = fresh or self._ab is None or ab.b.seq != self._ab.b.seq or ab.levels != self._ab.levels
            self._ab = ab
        self._snap = snap
        self.auto_load.tick(snap)
        with self.batch_update():
            if fresh:
                self._show_fast(snap)
            self._show_slow(snap, force=force)
        self.frame_stats.record(start, fetched, self._cpu_ns(), self._clock_ns())
        self.call_after_refresh(lambda: self.frame_stats.record_frame(start, self._cpu_ns()))

    def _ui_state(self) -> UiState:
        ab = self._ab
        return UiState(
            target=self._target,
            ramp=self.auto_load.status(),
            frozen=self._lanes.frozen,
            frames=self.frame_stats.summary(),
            probing=not self._started,
            watching=self.watch_only,
            canary_rate=self._canary_rate(),
            stopped_at_s=self._stopped_at_s,
            b_where=None if ab is None else (ab.b.base_url, ab.b.model),
            turn="" if ab is None else ab.turn,
        )

    def _canary_rate(self) -> float | None:
        view = self.engine.server_view()
        return view.canary.rate if view is not None and view.canary is not None else None

    def _show_fast(self, snap: Snapshot) -> None:
        """Counters and text, every tick (10 Hz)."""
        knee_ready = self._knee_goal() is not None
        if knee_ready != self._knee_ready:
            self._knee_ready = knee_ready
            self.refresh_bindings()  # `k` joins or leaves the footer
        self._fatal.show(snap.fatal, hint=fatal_hint(snap))
        if snap.fatal and self._stopped_at_s is None:
            self._stopped_at_s = snap.elapsed_s
        self._status.show(snap, self._ui_state())
        self._lanes.show(*self._lanes_of(snap), whole_answers=snap.endpoint == "embeddings")
        self._errors.show(snap)
        ab = self._ab
        if ab is not None and self._server.side == "B":
            self._server.show(ab.b_server, ab.b)
        else:
            self._server.show(self.engine.server_view(), snap)
        self._curve.show(snap)
        self._ttft.show(snap, self.window_s, self.convention)
        self._itl.show(snap, self.window_s, self.convention)

    def _lanes_of(self, snap: Snapshot) -> tuple[tuple[LaneView, ...], int]:
        """The lanes and the count in flight; with ``--ab`` both sides', each lane marked A or B."""
        if self._ab is None:
            return snap.lanes, snap.in_flight
        b = self._ab.b
        lanes = tuple(replace(lane, side=side) for side, s in (("A", snap), ("B", b)) for lane in s.lanes)
        return lanes, snap.in_flight + b.in_flight

    def _b_points(self, mode: str) -> list[tuple[float, float]]:
        """B's curve: (load, tok/s) of its latest level at each load of ``mode``."""
        if self._ab is None:
            return []
        latest = {lv.value: lv.output_tps for lv in self._ab.b.levels if lv.mode == mode and lv.value > 0}
        return sorted((v, tps) for v, tps in latest.items() if math.isfinite(tps))

    def _ab_level(self, level: LevelView) -> AbLevel | None:
        """A's level as judged against B's at its load, once it has been; in turns, its load's verdict."""
        if self._ab is None:
            return None
        turns = self._ab.mode == "alternate"
        return next((lv for lv in self._ab.levels if (lv.mode, lv.value) == (level.mode, level.value)
                     if turns or lv.a_level_id == level.level_id), None)  # fmt: skip

    def _show_slow(self, snap: Snapshot, *, force: bool) -> None:
        """Plots and the table: only when visible and changed, spread over ticks so that no tick pays for
        two of them (the table's repaint is a few ms; a plot build as much, on the plot thread, where
        spacing them out still keeps it from holding the GIL for long stretches)."""
        table = self._table
        if (
            (force or self._ticks % self.TABLE_EVERY_TICKS == 0)
            and table.region.area
            and self.screen.is_active
        ):
            table.note = "" if self._ab is None or self._ab.capacity is None else self._ab.capacity.line()
            changed = table.show(
                snap.levels,
                0 if snap.load.paused else snap.level_id,  # paused: no level runs, none is marked
                snap.knee,
                self.convention,
                self._server_means.of(
                    self.engine.server_view(), snap.levels, self.engine.t0_ns, self._clock_ns()
                ),
                whole_answers=snap.endpoint == "embeddings",
            )
            if changed and not force:
                return
        self._plots.redraw(self._ticks, force=force)

    def _redraw_plots(self) -> None:
        """After a key that changes what a plot shows: redraw the visible ones now, not at the next slot."""
        if self._snap is None:
            return
        with self.batch_update():
            self._show_fast(self._snap)
            self._show_slow(self._snap, force=True)

    # --- layout -----------------------------------------------------------------------------------

    @property
    def compact(self) -> bool:
        """True while the small layout (one pane group at a time, `v` cycles) is in force."""
        return self._compact

    def _main_screen(self) -> Screen[object]:
        return self.screen_stack[0]

    def _apply_layout(self, size: Size | None = None) -> None:
        """Choose the layout for ``size`` (the current one if None) on every resize, both ways."""
        self._compact = is_compact(*(size if size is not None else self.size))
        set_layout(self._main_screen(), compact=self._compact, watch_only=self.watch_only, view=self.view)
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "server_side" and self._pair is None:
            return False
        if action == "toggle_ramp" and self._pair is not None and self._pair.mode == "alternate":
            return False  # the ramp reads A's levels, which pause for each of B's turns
        return not (self.watch_only and action in keys.WATCH_OFF)

    def _footer_offers(self, action: str) -> bool:
        """`k` leaves the footer while there is no knee, `v` while every pane is on screen; pressed anyway
        (or picked in the palette), each says why it does nothing."""
        if action == "next_view":
            return self.compact
        return action != "knee" or self._knee_goal() is not None

    # --- load keys --------------------------------------------------------------------------------

    def set_target(self, target: LoadTarget, *, from_ramp: bool = False) -> None:
        """The one place a load target is sent to the engine; a load key (not ``from_ramp``) ends the
        schedule and the ramp."""
        if not from_ramp:
            self.auto_load.load_key()
        self._target = target
        self.engine.set_load(target)
        if self._snap is not None:
            self._status.show(self._snap, self._ui_state())

    def action_load_step(self, direction: int) -> None:
        self.set_target(control.step(self._target, direction))

    def action_load_scale(self, factor: float) -> None:
        self.set_target(control.scale(self._target, factor))

    def action_toggle_mode(self) -> None:
        measured = self._snap.request_per_s if self._snap is not None else 0.0
        measured = measured if math.isfinite(measured) else 0.0
        self.set_target(control.toggle_mode(self._target, measured))

    def action_toggle_pause(self) -> None:
        self.set_target(control.toggle_pause(self._target))

    def action_toggle_ramp(self) -> None:
        self.auto_load.toggle_ramp(self._target)

    def _show_ramp_result(self, result: RampResult | None) -> None:
        self._curve.set_note(result.subtitle() if result is not None else "")
        self.refresh_bindings()

    def _knee_goal(self) -> LoadTarget | None:
        return self.auto_load.knee_goal(self._snap, self._target)

    def action_knee(self) -> None:
        goal = self._knee_goal()
        if goal is None:
            self.notify("no knee measured yet: `a` ramps the load until it finds one", title="knee")
            return
        self.set_target(goal)
        self.notify(f"load back to the knee: {load_label(goal)}", title="knee", timeout=3)

    # --- view keys --------------------------------------------------------------------------------

    def action_cycle_itl(self) -> None:
        self.convention = ITL_CONVENTIONS[(ITL_CONVENTIONS.index(self.convention) + 1) % len(ITL_CONVENTIONS)]
        self._redraw_plots()

    def action_cycle_window(self) -> None:
        self.window_s = WINDOWS_S[(WINDOWS_S.index(self.window_s) + 1) % len(WINDOWS_S)]
        self._redraw_plots()

    def action_next_view(self) -> None:
        if not self.compact:
            self.notify(ALL_ON_SCREEN, title="view", timeout=3)
            return
        self.view = next_view(self.view)
        self._apply_layout()
        self.call_after_refresh(self._redraw_plots)

    def action_server_side(self) -> None:
        """With ``--ab``: the server pane shows the other endpoint's server."""
        self._server.side = "B" if self._server.side == "A" else "A"
        if self._snap is not None:
            self._show_fast(self._snap)

    def action_freeze_text(self) -> None:
        lanes = self._lanes
        lanes.frozen = not lanes.frozen
        if self._snap is not None:
            self._show_fast(self._snap)

    def action_next_theme(self) -> None:
        names = self._theme_names
        if names:
            current = names.index(self.theme) if self.theme in names else -1
            self.theme = names[(current + 1) % len(names)]
            self.notify(f"theme: {self.theme}", timeout=2)

    def action_help(self) -> None:
        # One help screen, installed on first use and pushed again after: building it (Rich's Markdown
        # parsed and laid out) was most of the time `?` took to act.
        if not self.is_screen_installed("help"):
            self.install_screen(
                HelpScreen(lambda: self._snap.health if self._snap is not None else None), "help"
            )
        self.push_screen("help")

    def action_mark(self) -> None:
        """Ask for a short label and add a mark to the session at this moment (a replay seeks to it)."""
        mark = getattr(self.engine, "mark", None)
        if mark is None:
            self.notify("this run is not recorded: no marks", timeout=3)
            return
        from tui.app.widgets.mark import MarkScreen

        self.push_screen(MarkScreen(), lambda label: mark(label) if label else None)

    def action_reset_cache(self) -> None:
        """Ask the server to drop its prefix cache; the engine then opens a fresh level at this load."""
        if getattr(self.engine, "reset_cache", None) is None:  # a load engine's (`EngineHandle.reset_cache`)
            self.notify("this engine cannot ask the server to drop its cache", title="cache", timeout=3)
            return
        self.notify("asking the server to drop its prefix cache…", title="cache", timeout=2)
        self._reset_cache()

    @work(thread=True, exclusive=True, group="cache-reset")
    def _reset_cache(self) -> None:
        """Off the UI thread: the reset is a few blocking requests."""
        outcome = self.engine.reset_cache()  # type: ignore[attr-defined]  # checked in the action
        severity = "information" if outcome.done else "warning"
        self.call_from_thread(self.notify, outcome.line, title="cache", severity=severity, timeout=6)

    def action_inspect_request(self) -> None:
        """The palette's way to a request's detail: the lanes focused, the picked (else top) lane opened."""
        self._lanes.focus()
        self._lanes.action_open()

    @on(StreamLanes.Open)
    def open_request(self, message: StreamLanes.Open) -> None:
        levels = self._snap.levels if self._snap is not None else ()  # a lane's level began before it
        engine = self._pair.b if self._pair is not None and message.side == "B" else self.engine
        if engine is not self.engine and self._ab is not None:
            levels = self._ab.b.levels
        self.push_screen(RequestDetailScreen(message.request_id, engine.detail, levels=levels))

    # --- files and quitting -----------------------------------------------------------------------

    def action_save(self) -> None:
        # The last save's toast would be in this one's screenshot: cleared, and the screen drawn without it.
        self.clear_notifications()
        self.call_after_refresh(save_and_say, self, self.engine, self.save_dir, self.requests_log)

    async def action_quit(self, reason: str = "quit") -> None:
        """Cancel in-flight requests, write the results, exit (0, or 1 if the engine had stopped on a fatal
        error). ``reason`` is saved as the results' ``interrupted_by`` (a signal's name when one quit)."""
        self._fatal.show("cancelling in-flight requests…", prefix="stopping: ")
        self.call_after_refresh(self._finish_quit, reason)

    def _finish_quit(self, reason: str) -> None:
        failed = self._snap is not None and bool(self._snap.fatal)
        try:
            self.engine.stop()
        finally:
            self.quit_notes += quit_notes(
                self.engine, self.output, self._snap, watching=self.watch_only, reason=reason
            )
            lost = getattr(self.engine, "session_lost", None)
            self.exit(1 if failed or lost is not None else 0)

    # --- command palette --------------------------------------------------------------------------

    PALETTE: ClassVar[tuple[tuple[str, str, str], ...]] = keys.COMMANDS
    """The command palette's entries: (title, help, action); a key's action and the palette's are one."""

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        for title, help_text, action in self.PALETTE:
            if self.check_action(action.partition("(")[0], ()):  # not a load key in watch or replay
                yield SystemCommand(title, help_text, partial(self.run_action, action))
