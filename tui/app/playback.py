"""`tokentop replay SESSION`: the live app's panes over a recorded session, with no server. The same
panes and view keys (ITL convention, window, view, theme, help); the load keys give way to the replay's:
play/pause, seek by 10 s, to the next or previous level or mark, and speed."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from tui.app import keys
from tui.app.app import TokentopApp
from tui.app.widgets.status import UiState
from tui.configs import ReplayConfig
from tui.engine.host.playback_engine import PlaybackEngine

REPLAY_BINDINGS: list[BindingType] = [
    Binding("space", "replay_toggle", "play/pause"),
    Binding("right", "replay_seek(10)", "±10 s", key_display="←/→"),
    Binding("left", "replay_seek(-10)", "-10 s", show=False),
    Binding("right_square_bracket", "replay_level(1)", "level", key_display="]/["),
    Binding("left_square_bracket", "replay_level(-1)", "previous level", show=False),
    Binding("n", "replay_mark(1)", "mark", key_display="n/N"),
    Binding("N", "replay_mark(-1)", "previous mark", show=False),
    Binding("plus,equals_sign", "replay_speed(2.0)", "speed", key_display="+/-"),
    Binding("minus", "replay_speed(0.5)", "slower", show=False),
]
REPLAY_COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("Play / pause replay", "Stop or start the recording's clock (space)", "replay_toggle"),
    ("Seek forward", "10 s later in the recording (right)", "replay_seek(10)"),
    ("Seek back", "10 s earlier in the recording (left)", "replay_seek(-10)"),
    ("Next level", "The next load level's start (])", "replay_level(1)"),
    ("Previous level", "The previous load level's start ([)", "replay_level(-1)"),
    ("Next mark", "The next mark set while recording (n)", "replay_mark(1)"),
    ("Previous mark", "The previous mark set while recording (N)", "replay_mark(-1)"),
    ("Faster replay", "Double the replay's speed (+)", "replay_speed(2.0)"),
    ("Slower replay", "Halve the replay's speed (-)", "replay_speed(0.5)"),
)
"""The replay's own palette entries (the live app's view keys follow them)."""
NO_TEXT_NOTE = "no text: recorded without --record-text (timings only)"
"""Under the lanes of a session recorded without its text, which replay blank."""
LOAD_ACTIONS = frozenset(
    {"load_step", "load_scale", "toggle_mode", "toggle_pause", "toggle_ramp", "knee", "mark"}
)
"""The live app's actions that set a load (or mark it): a replay's load is the recording's."""


class ReplayApp(TokentopApp):
    """The live app over a `PlaybackEngine`: it renders the replay's snapshots on the replay's clock."""

    BINDINGS: ClassVar[list[BindingType]] = REPLAY_BINDINGS
    FOOTER_RANK: ClassVar[tuple[str, ...]] = (
        "replay_toggle",
        "replay_seek(10)",
        "replay_level(1)",
        "replay_mark(1)",
        "replay_speed(2.0)",
        "cycle_itl",
        "cycle_window",
        "next_view",
        "help",
        "quit",
    )

    PALETTE: ClassVar[tuple[tuple[str, str, str], ...]] = (*REPLAY_COMMANDS, *keys.COMMANDS)

    replay: PlaybackEngine

    def on_mount(self) -> None:
        if not self.replay.config.options.record_text:  # the recorder left the text out: say so, not blank
            self._lanes.set_note(NO_TEXT_NOTE)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in LOAD_ACTIONS:
            return False
        return super().check_action(action, parameters)

    def _ui_state(self) -> UiState:
        state = super()._ui_state()
        return UiState(
            target=self.replay.load,
            ramp=self.replay.status(),
            frozen=state.frozen,
            frames=state.frames,
        )

    def _after_seek(self, note: str | None = None) -> None:
        if note:
            self.notify(note, timeout=2)
        self.poll(force=True)

    def action_replay_toggle(self) -> None:
        self.replay.toggle()
        self._after_seek()

    def action_replay_seek(self, seconds: float) -> None:
        self.replay.seek_by(seconds)
        self._after_seek()

    def action_replay_level(self, step: int) -> None:
        found = self.replay.seek_level(step)
        self._after_seek("no level that way" if found is None else f"level {found}")

    def action_replay_mark(self, step: int) -> None:
        found = self.replay.seek_mark(step)
        self._after_seek("no mark that way" if found is None else f"mark: {found}")

    def action_replay_speed(self, factor: float) -> None:
        speed = self.replay.set_speed(factor)
        self._after_seek(f"speed ×{speed:g}")


def make_replay_app(replay: PlaybackEngine, *, theme: str | None = None, **options: object) -> ReplayApp:
    """The replay app for ``replay`` (the CLI and the tests both call it); ``options`` as `TokentopApp`."""
    from tui.app.settings import AppSettings
    from tui.app.themes import load_themes, resolve_theme

    themes = load_themes()
    name = resolve_theme(theme, themes).name
    options.setdefault("clock_ns", replay.now_ns)
    app = ReplayApp(replay, AppSettings(themes=themes, theme=name, **options))  # type: ignore[arg-type]
    app.replay = replay
    return app


def run_replay(config: ReplayConfig) -> int:
    """Open the session ``config`` names and run the replay app until `q`."""
    import sys

    from tui.engine.host.playback_engine import open_playback

    replay = open_playback(config.session)
    if replay.session.cut:
        print(f"tokentop: {config.session} is cut short; it replays up to its cut", file=sys.stderr)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("tokentop: error: replay needs a terminal", file=sys.stderr)
        return 2
    replay.set_speed(config.speed)
    replay.start()
    app = make_replay_app(replay, theme=config.theme)
    result = app.run()
    return result if isinstance(result, int) else 0
