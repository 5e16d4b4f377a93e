"""The live app's keys: bindings, which the footer keeps first, the command palette's entries, and the
ones `watch` turns off."""

from __future__ import annotations

from textual.binding import Binding, BindingType

BINDINGS: list[BindingType] = [
    # The footer shows one entry per key pair; `KeyFooter` shows as many as fit, by `FOOTER_RANK`.
    Binding("plus,equals_sign,up", "load_step(1)", "load", key_display="+/-"),
    Binding("minus,down", "load_step(-1)", "less", show=False),
    Binding("right_square_bracket", "load_scale(2.0)", "×2 ÷2", key_display="]/["),
    Binding("left_square_bracket", "load_scale(0.5)", "÷2", show=False),
    Binding("m", "toggle_mode", "mode"),
    Binding("space", "toggle_pause", "pause"),
    Binding("a", "toggle_ramp", "ramp"),
    Binding("k", "knee", "knee"),
    Binding("i", "cycle_itl", "ITL"),
    Binding("w", "cycle_window", "window"),
    Binding("v", "next_view", "view"),
    Binding("p", "freeze_text", "freeze"),
    Binding("s", "save", "save"),
    Binding("b", "mark", "mark"),
    Binding("c", "reset_cache", "cold", show=False),  # in `?` and the palette: the footer is full
    Binding("e", "server_side", "A/B server", show=False),  # with --ab only
    Binding("t", "next_theme", "theme"),
    Binding("ctrl+p", "command_palette", "palette", priority=True, tooltip="Open the command palette"),
    Binding("question_mark", "help", "help", key_display="?"),
    Binding("q", "quit", "quit"),
    Binding("ctrl+c", "quit", "quit", show=False, priority=True),
]
FOOTER_RANK: tuple[str, ...] = (
    "load_step(1)",
    "load_scale(2.0)",
    "toggle_pause",
    "toggle_ramp",
    "knee",
    "next_view",  # only while the small layout hides panes: then the way to them
    "help",
    "quit",
    "toggle_mode",
    "cycle_itl",
    "cycle_window",
    "save",
    "mark",
    "freeze_text",
    "next_theme",
    "command_palette",
)
"""The footer's keys, most useful first: at 80 columns the last ones give way (all are in `?`)."""

COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("More load", "One user (or one rate step) more (+)", "load_step(1)"),
    ("Less load", "One user (or one rate step) fewer (-)", "load_step(-1)"),
    ("Double load", "Double the users or the rate (])", "load_scale(2.0)"),
    ("Halve load", "Halve the users or the rate ([)", "load_scale(0.5)"),
    ("Switch mode", "Concurrency (closed loop) ⇄ rate (open loop) (m)", "toggle_mode"),
    ("Pause / resume load", "Stop issuing requests, or start again (space)", "toggle_pause"),
    ("Auto ramp", "1, 2, 4, … until the knee or an SLO, again to stop (a)", "toggle_ramp"),
    ("Back to the knee", "Set the load to the knee's level, the auto ramp's result (k)", "knee"),
    ("ITL convention", "Chunk gap → TPOT → E2E/OSL (i)", "cycle_itl"),
    ("Histogram window", "10 s → 30 s → 60 s → whole run (w)", "cycle_window"),
    ("Next view", "The next pane group, when the terminal is too small for all (v)", "next_view"),
    ("Freeze text", "Pause / resume the token lanes (p)", "freeze_text"),
    (
        "Inspect a request",
        "A token lane's request: timings, chunks, text (tab, up/down, enter)",
        "inspect_request",
    ),
    ("Save", "Results JSON with its CSV, vLLM files and plot, requests log, SVG screenshot (s)", "save"),
    ("Mark", "Add a labelled mark to the recorded session here, a replay seeks to it (b)", "mark"),
    (
        "Start cold",
        "Ask the server to drop its prefix cache, then open a fresh level at this load (c)",
        "reset_cache",
    ),
    ("Server pane: A or B", "With --ab: show B's server, or A's again (e)", "server_side"),
    ("Next theme", "Cycle the themes folder (t)", "next_theme"),
    ("Help", "Keys and what every metric means (?)", "help"),
    ("Quit", "Cancel in-flight requests and exit (q)", "quit"),
)
"""The command palette (ctrl+p): (title, help with the key, action); every key's action has one."""

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
        "inspect_request",
        "mark",
        "reset_cache",
        "server_side",
    }
)
"""Actions that mean nothing while watching (no load, no lanes): disabled and left out of the footer."""
