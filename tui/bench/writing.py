"""What a finished bench run writes besides its results file: the exports and the plot made from that same
document (each side's with ``--ab``), and the end table's J/tok and server hit-rate columns."""

from __future__ import annotations

from tui.bench.ab import b_side
from tui.configs import BenchConfig
from tui.engine.results.exports import write_exports
from tui.engine.results.model import Results
from tui.engine.results.plot import write_plot
from tui.terminal import say


def write_run_exports(results: Results, config: BenchConfig, status: int) -> int:
    """--vllm-results and --csv from the results just written; the exit status (1 if one failed)."""
    try:
        written = write_exports(results, vllm_dir=config.vllm_results, csv_path=config.csv)
        if results.ab is not None:  # B's beside A's
            written += write_exports(
                results.ab.b, vllm_dir=b_side(config.vllm_results), csv_path=b_side(config.csv)
            )
    except OSError as exc:
        say(f"tokentop: error: cannot write the exports: {exc}")
        return status or 1
    if written and not config.quiet:
        where = ", ".join(sorted({str(p.parent) for p in written}))
        say(f"exports written: {len(written)} file(s) in {where}")
    return status


def write_run_plot(results: Results, config: BenchConfig, status: int) -> int:
    """--plot from the results just written; the exit status (1 if it could not be written)."""
    path = config.plot
    if path is None:
        return status
    try:
        write_plot(results, path)
        if results.ab is not None:
            write_plot(results.ab.b, b_side(path) or path)  # B's beside A's
    except OSError as exc:
        say(f"tokentop: error: cannot write the plot {path}: {exc.strerror or exc}")
        return status or 1
    if not config.quiet:
        say(f"plot written to {path}")
    return status


def joules_per_token(results: Results | None) -> dict[int, float]:
    """Each level's J per output token where the GPUs' energy counter gave one (the table's column)."""
    out = {}
    for lv in results.levels if results is not None else ():
        j = (lv.server.gpu or {}).get("joules_per_output_token") if lv.server is not None else None
        if j is not None:
            out[lv.level_id] = float(j)
    return out


def server_hit_rates(results: Results | None) -> dict[int, float | None]:
    """Each level's prefix-cache hit rate by the server's counters (the table's, where the requests gave no
    ``cached_tokens``)."""
    if results is None:
        return {}
    return {lv.level_id: lv.server.prefix_cache_hit_rate for lv in results.levels if lv.server is not None}


def late_scrapes(results: Results | None) -> dict[int, int]:
    """Each level's late scrapes of ``/metrics`` (the results' ``server.late_scrapes``), where it had any."""
    levels = results.levels if results is not None else ()
    return {
        lv.level_id: lv.server.late_scrapes
        for lv in levels
        if lv.server is not None and lv.server.late_scrapes
    }


def server_columns(
    results: Results | None,
) -> tuple[dict[int, float], dict[int, float | None], dict[int, int]]:
    """What the end table takes from the results' server figures: `joules_per_token`, `server_hit_rates`,
    `late_scrapes`."""
    return joules_per_token(results), server_hit_rates(results), late_scrapes(results)
