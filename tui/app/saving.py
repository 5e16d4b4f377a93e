"""The `s` key: results JSON, its exports (vLLM-shaped files per level, the level table as CSV, the report
plot), a copy of the requests log and an SVG of the screen, side by side; and the toast's list of them."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from tui.engine.api import Engine
from tui.engine.results.exports import write_exports
from tui.engine.results.files import read_document
from tui.engine.results.model import Results
from tui.engine.results.plot import write_plot


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
    ``--vllm-results`` and ``--plot`` write them (a watch, with no load levels, has no plot)."""
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
    if requests_log is not None and requests_log.exists():
        saved.append(Path(shutil.copyfile(requests_log, base.with_suffix(".jsonl"))))
    saved.append(Path(screenshot(base.name + ".svg", str(save_dir))))
    return saved


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
