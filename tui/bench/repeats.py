"""`bench --repeat N`: the whole sweep run N times against the same server, each run with its own outputs and
session, so the noise between runs can be measured (`tokentop compare` takes the N sessions as one side)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tui.configs import BenchConfig
from tui.engine.recording.file import SUFFIX
from tui.engine.workload.text import new_salt


def repeat_path(path: Path, k: int) -> Path:
    """``path`` for run ``k``: ``results.json`` -> ``results-2.json``, ``run.tokentop-session.gz`` ->
    ``run-2.tokentop-session.gz``, a folder ``vllm`` -> ``vllm-2``."""
    name = path.name
    if name.endswith(SUFFIX):
        return path.with_name(f"{name[: -len(SUFFIX)]}-{k}{SUFFIX}")
    return path.with_name(f"{path.stem}-{k}{path.suffix}")


def repeat_config(config: BenchConfig, k: int) -> BenchConfig:
    """The config of run ``k`` of ``config.repeat``: every output path numbered (`repeat_path`), the session
    numbered and marked as one of the set (``record_repeat``: the first's unnumbered name), and its own
    prompts (a new salt) unless ``--repeat-prompts`` asked for the same ones."""
    if config.repeat <= 1:
        return config

    def numbered(path: Path | None) -> Path | None:
        return None if path is None else repeat_path(path, k)

    workload = config.workload
    if config.fresh_prompts and k > 1:  # the server's prefix cache holds the earlier runs' prompts
        workload = replace(workload, prompt_salt=new_salt())
    options = config.options
    if options.record is not None:
        session = Path(options.record)
        the_set = session.name[: -len(SUFFIX)] if session.name.endswith(SUFFIX) else session.stem
        options = replace(options, record=str(repeat_path(session, k)), record_repeat=the_set)
    log = options.server_metrics_log
    options = replace(options, server_metrics_log=None if log is None else str(repeat_path(Path(log), k)))
    return replace(
        config,
        workload=workload,
        options=options,
        output=numbered(config.output),
        requests_log=numbered(config.requests_log),
        vllm_results=numbered(config.vllm_results),
        csv=numbered(config.csv),
        plot=numbered(config.plot),
    )
