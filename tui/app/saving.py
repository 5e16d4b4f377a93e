"""The `s` key: results JSON, a copy of the requests log and an SVG of the screen, side by side."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from tui.engine.api import Engine


def snapshot_base(save_dir: Path, now: datetime) -> Path:
    """`save_dir/tokentop-YYYYmmdd-HHMMSS`, with -2, -3, ... if that second is taken."""
    stamp = now.strftime("%Y%m%d-%H%M%S")
    base = save_dir / f"tokentop-{stamp}"
    n = 1
    while base.with_suffix(".json").exists():
        n += 1
        base = save_dir / f"tokentop-{stamp}-{n}"
    return base


def save_snapshot(
    engine: Engine,
    save_dir: Path,
    requests_log: Path | None,
    screenshot: Callable[[str, str], str],
    *,
    now: datetime | None = None,
) -> list[Path]:
    """Write the three files (the log only if there is one) and return their paths. `screenshot(filename,
    folder)` is the app's `save_screenshot`. Raises OSError (or the engine's error) on failure."""
    save_dir.mkdir(parents=True, exist_ok=True)
    base = snapshot_base(save_dir, now or datetime.now())
    saved = [engine.write_results(base.with_suffix(".json"))]
    if requests_log is not None and requests_log.exists():
        saved.append(Path(shutil.copyfile(requests_log, base.with_suffix(".jsonl"))))
    saved.append(Path(screenshot(base.name + ".svg", str(save_dir))))
    return saved
