"""`bench --repeat N`: the whole sweep run N times against the same server, each run with its own outputs and
session, so the noise between runs can be measured (`tokentop compare` takes the N sessions, or the N results
files, as one side: each carries the set's id)."""

from __future__ import annotations

import secrets
import time
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


def unnumbered(path: Path, k: int) -> Path | None:
    """The path `repeat_path` numbered ``k`` from (``run-2.json`` -> ``run.json``), or None: not so named."""
    name, tail = path.name, f"-{k}"
    stem, suffix = (name[: -len(SUFFIX)], SUFFIX) if name.endswith(SUFFIX) else (path.stem, path.suffix)
    if not stem.endswith(tail) or stem == tail:
        return None
    return path.with_name(stem[: -len(tail)] + suffix)


def set_id(config: BenchConfig) -> str:
    """The id every run of one ``--repeat`` set carries (sessions and results): the session's unnumbered
    name where it is recorded (as `tokentop compare LABEL` finds the set), else the start and a random
    tail."""
    if config.options.record is not None:
        session = Path(config.options.record)
        return session.name[: -len(SUFFIX)] if session.name.endswith(SUFFIX) else session.stem
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def repeat_config(config: BenchConfig, k: int, the_set: str | None = None) -> BenchConfig:
    """The config of run ``k`` of ``config.repeat``: every output path numbered (`repeat_path`), the session
    numbered, the session and results marked as run ``k`` of the set ``the_set`` (default `set_id`: pass
    one id for every run), and its own prompts (a new salt) unless ``--repeat-prompts`` asked for the same."""
    if config.repeat <= 1:
        return config
    the_set = set_id(config) if the_set is None else the_set

    def numbered(path: Path | None) -> Path | None:
        return None if path is None else repeat_path(path, k)

    workload = config.workload
    if config.fresh_prompts and k > 1:  # the server's prefix cache holds the earlier runs' prompts
        workload = replace(workload, prompt_salt=new_salt())
    options = replace(config.options, repeat_of=(the_set, k, config.repeat))
    if options.record is not None:
        options = replace(options, record=str(repeat_path(Path(options.record), k)), record_repeat=the_set)
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
