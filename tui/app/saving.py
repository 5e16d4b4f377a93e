"""The files the app writes. The `s` key: results JSON, its exports (vLLM-shaped files per level, the level
table as CSV, the report plot), a copy of the requests log and an SVG of the screen, side by side; and the
toast's list of them. Quitting: the results, to --output or kept in the state directory."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from textual.app import App

from tui.engine.api import Engine
from tui.engine.results.exports import write_exports
from tui.engine.results.files import read_document
from tui.engine.results.model import Results
from tui.engine.results.plot import write_plot
from tui.engine.snapshot import Snapshot
from tui.outputs import kept_results_path, state_dir


def snapshot_base(save_dir: Path, now: datetime) -> Path:
    """`save_dir/tokentop-YYYYmmdd-HHMMSS`, with -2, -3, ... if that second is taken."""
    stamp = now.strftime("%Y%m%d-%H%M%S")
    base = save_dir / f"tokentop-{stamp}"
    n = 1
    while base.with_suffix(".json").exists():
        n += 1
        base = save_dir / f"tokentop-{stamp}-{n}"
    return base


def save_run_files(
    engine: Engine,
    save_dir: Path,
    requests_log: Path | None,
    screenshot: Callable[[str, str], str],
    *,
    now: datetime | None = None,
) -> list[Path]:
    """Write the files (the log only if there is one) and return their paths. `screenshot(filename,
    folder)` is the app's `save_screenshot`. Raises OSError (or the engine's error) on failure.

    The exports are made from the results file as written (read back), so they can never disagree with it:
    ``BASE.csv``, the directory ``BASE-vllm/`` and ``BASE-plot.svg``, as bench's ``--csv``,
    ``--vllm-results`` and ``--plot`` write them (a watch, with no load levels, has no plot); with ``--ab``,
    B's beside them (``BASE-b.csv``...)."""
    save_dir.mkdir(parents=True, exist_ok=True)
    base = snapshot_base(save_dir, now or datetime.now())
    results_path = engine.write_results(base.with_suffix(".json"))
    saved = [results_path]
    results = read_document(results_path)
    saved += write_exports(
        results, vllm_dir=base.with_name(base.name + "-vllm"), csv_path=base.with_suffix(".csv")
    )
    if isinstance(results, Results):
        saved.append(write_plot(results, base.with_name(base.name + "-plot.svg")))
    if isinstance(results, Results) and results.ab is not None:  # --ab: B's own, as bench writes them
        b, b_base = results.ab.b, base.with_name(base.name + "-b")
        saved += write_exports(
            b, vllm_dir=b_base.with_name(b_base.name + "-vllm"), csv_path=b_base.with_suffix(".csv")
        )
        saved.append(write_plot(b, b_base.with_name(b_base.name + "-plot.svg")))
    if requests_log is not None and requests_log.exists():
        saved.append(Path(shutil.copyfile(requests_log, base.with_suffix(".jsonl"))))
    saved.append(Path(screenshot(base.name + ".svg", str(save_dir))))
    return saved


def save_and_say(app: App[int], engine: Engine, save_dir: Path, requests_log: Path | None) -> None:
    """`s`, once the screen is drawn: save the files, the screen among them, and say in a toast what was
    saved where, or why the save failed."""
    try:
        saved = save_run_files(
            engine,
            save_dir,
            requests_log,
            lambda name, folder: app.save_screenshot(filename=name, path=folder),
        )
    except Exception as exc:
        app.notify(f"save failed: {exc}", severity="error", timeout=10)
        return
    app.notify(f"{saved_list(saved, save_dir)}\nin {save_dir}", title="saved", timeout=8)


def saved_list(paths: Sequence[Path], save_dir: Path) -> str:
    """The toast's list of what was saved: each file in ``save_dir`` by name, a folder in it once, with how
    many files it got (one vLLM file per level would otherwise fill the toast)."""
    counts: dict[str, int] = {}
    for path in paths:
        parts = path.relative_to(save_dir).parts if path.is_relative_to(save_dir) else (path.name,)
        name = parts[0] + ("/" if len(parts) > 1 else "")
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(
        f"{name} ({n} file{'s' if n != 1 else ''})" if name.endswith("/") else name
        for name, n in counts.items()
    )


def quit_notes(
    engine: Engine, output: Path | None, snap: Snapshot | None, *, watching: bool, reason: str
) -> list[str]:
    """At quit, with the engine stopped: write the results to ``output``, or, without one, to the state
    directory (`kept_results_path`), so a run ended with `q` is never lost (a watch, or a run with no
    finished request, keeps none). Returns the lines for the terminal: where the results and the recorded
    session went, or why the results could not be written."""
    notes = []
    if output is not None or (not watching and snap is not None and snap.completed + snap.failed > 0):
        try:
            written = engine.write_results(output or kept_results_path(), interrupted=reason)
            notes.append(f"results {'written to' if output else 'kept in'} {written}")
        except Exception as exc:
            notes.append(f"could not write results to {output or state_dir()}: {exc}")
    recorded = getattr(engine, "session_path", None)
    lost = getattr(engine, "session_lost", None)
    if lost is not None:  # the disk failed under the recording: say what it holds, not "recorded"
        notes.append(lost.exit_line())
    elif recorded is not None:
        b_recorded = getattr(getattr(engine, "b", None), "session_path", None)  # --ab's B
        notes.append(f"session recorded to {recorded}" + (f" (B: {b_recorded})" if b_recorded else ""))
    return notes
