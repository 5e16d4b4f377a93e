"""The exports a face writes after a run, each a function of the results model: vLLM-shaped files, the CSV
table; and the registry `tokentop export --to` chooses from."""

from __future__ import annotations

from pathlib import Path

from tui.engine.results.csv import write_csv
from tui.engine.results.model import Document, Results
from tui.engine.results.vllm import write_vllm_results


def write_exports(doc: Document, *, vllm_dir: Path | None = None, csv_path: Path | None = None) -> list[Path]:
    """The exports asked for (None: not that one); every path written. A watch has no levels: nothing."""
    if not isinstance(doc, Results):
        return []
    written: list[Path] = []
    if vllm_dir is not None:
        written += write_vllm_results(doc, vllm_dir)
    if csv_path is not None:
        written.append(write_csv(doc, csv_path))
    return written
