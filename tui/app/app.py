"""The live app: polls engine snapshots on a fixed tick, renders them, turns keys into load targets."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from textual import events, on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Container, Horizontal
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.geometry import Size
from textual.screen import Screen

from tui.app import control, keys
from tui.app.frames import FrameStats
from tui.app.ramp_result import RampResult, load_label, ramp_result, snapshot_knee_target
from tui.app.saving import save_run_files, saved_list
from tui.app.settings import AppSettings
from tui.app.terminal import HangUpSafeDriver
from tui.app.themes import APP_VARIABLE_DEFAULTS
from tui.app.widgets.curve import ThroughputCurve
from tui.app.widgets.detail import RequestDetailScreen
from tui.app.widgets.errors import ErrorsPane
from tui.app.widgets.footer import KeyFooter
from tui.app.widgets.help import HelpScreen
from tui.app.widgets.latency import LatencyHistogram
from tui.app.widgets.levels import LevelTable, ServerMeans
from tui.app.widgets.plot_pane import PlotPane
from tui.app.widgets.server import ServerPane
from tui.app.widgets.status import FatalBanner, StatusBar, UiState, fatal_hint
from tui.app.widgets.streams import StreamLanes
from tui.engine.api import Engine
from tui.engine.config import LoadTarget
from tui.engine.control.ramp import RampPolicy, RampStep
from tui.engine.snapshot import ITL_CONVENTIONS, WINDOWS_S, ItlConvention, Snapshot
from tui.outputs import kept_results_path, state_dir

VIEWS = ("live", "latency", "levels", "server")
"""Pane groups shown one at a time when the terminal is too small for all of them (`v` cycles)."""
WATCH_OFF = frozenset(
    {
        "load_step",
        "cycle_itl",
        "cycle_window",
        "load_scale",
        "toggle_mode",
        "toggle_pause",
        "toggle_ramp",
        "knee",
        "next_view",
        "freeze_text",
        "mark",
    }
)
"""Actions that mean nothing while watching (no load, no lanes): disabled and left out of the footer."""
COMPACT_BELOW = (120, 36)
"""Width and height under which the app shows one view at a time."""
GC_MIDDLE_EVERY = 3
"""The app collects its middle generation every this many young collections (Python's default: 10)."""


@runtime_checkable
class StartsInBackground(Protocol):
    """An engine that checks the server and starts its workers after `start` returns (`EngineHandle`)."""

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        """True once the workers are started or the start failed; ``timeout_s=0`` only looks."""
        ...


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
        self._schedule = list(settings.schedule)
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
        self._slo_ttft_ms = settings.slo_ttft_ms
        self._slo_tpot_ms = settings.slo_tpot_ms
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
        self._next_plot = 0
        self._ramp: RampPolicy | None = None
        self._ramp_note = ""
        self._ramp_result: RampResult | None = None
        """Why the last ramp stopped and where `k` goes; on screen until the next load change."""
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
        self._plots: list[PlotPane] = [self._curve, self._ttft, self._itl]
        if (baseline := settings.baseline) is not None:
            self._curve.baseline = baseline.points
            self._table.baseline = baseline.level_for
        # plotext builds (~5 ms each) made the UI's p99 tick; one background thread builds them in turn,
        # so the UI thread only reads the theme and data in and shows the result. Without it (tests)
        # plots are built inline and a screen is complete as soon as `poll()` returns.
        self._plot_executor = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokentop-plots")
            if settings.plot_thread
            else None
        )
        for pane in self._plots:
            pane.executor = self._plot_executor

    def get_driver_class(self) -> type[Driver]:
        driver = super().get_driver_class()
        return HangUpSafeDriver if driver is LinuxDriver else driver

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_VARIABLE_DEFAULTS)

    def compose(self) -> ComposeResult:
        yield self._fatal
        yield self._status
        with Container(id="body"):
            with Horizontal(id="top"):
                yield self._lanes
                yield self._curve
            with Horizontal(id="mid"):
                yield self._ttft
                yield self._itl
            with Horizontal(id="bottom"):
                yield self._table
                yield self._server
                yield self._errors
        yield KeyFooter(self.FOOTER_RANK)

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
        if self._plot_executor is not None:
            self._plot_executor.shutdown(wait=False, cancel_futures=True)

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
        self._snap = snap
        if self._ramp is not None:
            self._ramp_tick(snap)
        if self._schedule:
            self._schedule_tick(snap)
        with self.batch_update():
            if fresh:
                self._show_fast(snap)
            self._show_slow(snap, force=force)
        self.frame_stats.record(start, fetched, self._cpu_ns(), self._clock_ns())
        self.call_after_refresh(lambda: self.frame_stats.record_frame(start, self._cpu_ns()))

    def _ui_state(self) -> UiState:
        return UiState(
            target=self._target,
            ramp=self._ramp_note or (self._ramp_result.status() if self._ramp_result is not None else ""),
            frozen=self._lanes.frozen,
            frames=self.frame_stats.summary(),
            probing=not self._started,
            watching=self.watch_only,
            canary_rate=self._canary_rate(),
            stopped_at_s=self._stopped_at_s,
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
        self._lanes.show(snap.lanes, snap.in_flight)
        self._errors.show(snap)
        self._server.show(self.engine.server_view(), snap)
        self._curve.show(snap)
        self._ttft.show(snap, self.window_s, self.convention)
        self._itl.show(snap, self.window_s, self.convention)

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
            changed = table.show(
                snap.levels,
                0 if snap.load.paused else snap.level_id,  # paused: no level runs, none is marked
                snap.knee,
                self.convention,
                self._server_means.of(
                    self.engine.server_view(), snap.levels, self.engine.t0_ns, self._clock_ns()
                ),
            )
            if changed and not force:
                return
        panes = self._plots
        for offset in range(len(panes)):
            index = (self._next_plot + offset) % len(panes)
            pane = panes[index]
            if not (pane.showing and pane.stale):
                continue
            if force or pane.resized or pane.drawn_tick + pane.every_ticks <= self._ticks:
                pane.redraw()
                pane.drawn_tick = self._ticks
                if not force:
                    self._next_plot = index + 1
                    break

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
        width, height = size if size is not None else self.size
        self._compact = width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]
        screen = self._main_screen()
        screen.set_class(self._compact and not self.watch_only, "-compact")
        screen.set_class(self.watch_only, "-watch")
        for name in VIEWS:
            screen.set_class(self.view == name, f"-view-{name}")
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.watch_only and action in WATCH_OFF:
            return False
        if action == "next_view":
            return self.compact
        if action == "knee":
            return self._knee_goal() is not None
        return True

    # --- load keys --------------------------------------------------------------------------------

    def set_target(self, target: LoadTarget, *, from_ramp: bool = False) -> None:
        """The one place a load target is sent to the engine."""
        if not from_ramp:
            if self._schedule:
                self._schedule.clear()
                self.notify("schedule stopped by a load key", title="schedule")
            if self._ramp is not None:
                self._stop_ramp("stopped by a load key")
            self._show_ramp_result(None)
        self._target = target
        self.engine.set_load(target)
        if self._snap is not None:
            self._status.show(self._snap, self._ui_state())

    def _schedule_tick(self, snap: Snapshot) -> None:
        """Set each scheduled target whose time has come (the last one due, if several are)."""
        due = None
        while self._schedule and self._schedule[0][0] <= snap.elapsed_s:
            due = self._schedule.pop(0)[1]
        if due is not None:
            self.set_target(due, from_ramp=True)
            if not self._schedule:
                self.notify("the schedule is done; the keys set the load again", title="schedule")

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
        if self._ramp is not None:
            self._stop_ramp("stopped")
            return
        # The ramp runs in the current mode: 1, 2, 4, ... users, or 1, 2, 4, ... req/s.
        self._ramp = RampPolicy(
            mode=self._target.mode, slo_ttft_ms=self._slo_ttft_ms, slo_tpot_ms=self._slo_tpot_ms
        )
        self._ramp_note = self._ramp_progress()
        self.set_target(self._ramp.first(self._target), from_ramp=True)

    def _ramp_progress(self) -> str:
        assert self._ramp is not None
        if self._ramp.stopping is not None:
            return f"auto ramp stopping: {self._ramp.stopping.split(':')[0]} · settling"
        unit = {"concurrency": "users", "trace": "x speed"}.get(self._ramp.mode, "req/s")
        return f"auto ramp: {self._ramp.value:g} {unit}, holding until steady"

    def _ramp_tick(self, snap: Snapshot) -> None:
        assert self._ramp is not None
        decision = self._ramp.step(snap)
        if decision.target is not None:  # the next level, or the load paused where the ramp stops
            self.set_target(decision.target, from_ramp=True)
        if decision.done:
            self._stop_ramp(decision.reason, decision)
        if self._ramp is not None:
            self._ramp_note = self._ramp_progress()

    def _stop_ramp(self, reason: str, step: RampStep | None = None) -> None:
        """End the ramp; when it stopped by itself (``step`` given) the engine records what it said, and its
        result stays on screen."""
        self._ramp = None
        self._ramp_note = ""
        if step is not None:
            if step.verdict is not None:
                self.engine.record_ramp(step.verdict)
            self._show_ramp_result(ramp_result(step))
        self.notify(f"auto ramp: {reason}", title="ramp")

    def _show_ramp_result(self, result: RampResult | None) -> None:
        if result is None and self._ramp_result is None:
            return
        self._ramp_result = result
        self._curve.set_note(result.subtitle() if result is not None else "")
        self.refresh_bindings()

    def _knee_goal(self) -> LoadTarget | None:
        """Where `k` sets the load: the ramp's result while on screen, else the measured knee."""
        if self._ramp_result is not None and self._ramp_result.knee is not None:
            return self._ramp_result.knee
        return snapshot_knee_target(self._snap, self._target)

    def action_knee(self) -> None:
        goal = self._knee_goal()
        if goal is None:
            self.notify("no knee measured yet", title="knee", timeout=3)
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
        self.view = VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)]
        self._apply_layout()
        self.call_after_refresh(self._redraw_plots)

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

    @on(StreamLanes.Open)
    def open_request(self, message: StreamLanes.Open) -> None:
        self.push_screen(RequestDetailScreen(message.request_id, self.engine.detail))

    # --- files and quitting -----------------------------------------------------------------------

    def action_save(self) -> None:
        try:
            saved = save_run_files(self.engine, self.save_dir, self.requests_log, self._save_svg)
        except Exception as exc:
            self.notify(f"save failed: {exc}", severity="error", timeout=10)
            return
        self.notify(f"{saved_list(saved, self.save_dir)}\nin {self.save_dir}", title="saved", timeout=8)

    def _save_svg(self, filename: str, folder: str) -> str:
        return self.save_screenshot(filename=filename, path=folder)

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
            self._keep_results(reason)
            recorded = getattr(self.engine, "session_path", None)
            lost = getattr(self.engine, "session_lost", None)
            if lost is not None:
                self.quit_notes.append(lost.exit_line())
            elif recorded is not None:
                self.quit_notes.append(f"session recorded to {recorded}")
            self.exit(1 if failed or lost is not None else 0)

    def _keep_results(self, reason: str) -> None:
        """Write the results to --output, or, without one, to the state directory (`kept_results_path`),
        so a run ended with `q` is never lost; `quit_notes` says where."""
        output = self.output
        if output is None:
            measured = self._snap is not None and self._snap.completed + self._snap.failed > 0
            if self.watch_only or not measured:
                return
        try:
            path = output or kept_results_path()
            written = self.engine.write_results(path, interrupted=reason)
            self.quit_notes.append(f"results {'written to' if output else 'kept in'} {written}")
        except Exception as exc:
            self.quit_notes.append(f"could not write results to {output or state_dir()}: {exc}")

    # --- command palette --------------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        for title, help_text, action in keys.COMMANDS:
            yield SystemCommand(title, help_text, partial(self.run_action, action))
