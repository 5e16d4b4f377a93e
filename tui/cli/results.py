"""`tokentop plot RESULTS` and `tokentop export RESULTS --to ...`: a saved run's plot and exports, each made
by `tui.engine.results` from the file read back by its one reader, as a typed config (`tui.configs`) says.
Each command's flags and reader sit beside its run: flags that do not fit together are refused in reading
them (exit 2); a bad file or path is one line and exit 1."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tui.configs import EXPORTS, ExportConfig, ExportFormat, PlotConfig, UsageError
from tui.engine.recording.file import SessionError

if TYPE_CHECKING:  # the results model and its writers load numpy: imported by the runs, not by --help
    from tui.engine.results.model import Results

RESULTS_HELP = "a results JSON file or a session tokentop wrote"


def add_output_arg(p: argparse.ArgumentParser, *, metavar: str, help: str) -> None:
    """``--output``/``-o``, as bench, live and watch spell it; ``--out`` is kept as an alias."""
    p.add_argument("--output", "-o", "--out", dest="output", metavar=metavar, help=help)


def add_plot_args(p: argparse.ArgumentParser) -> None:
    """`tokentop plot RESULTS [--output PATH.svg]`."""
    p.add_argument("results", metavar="RESULTS", help=RESULTS_HELP)
    add_output_arg(p, metavar="PATH.svg", help="where to write it (default: beside RESULTS, .svg)")


def plot_config(ns: argparse.Namespace) -> PlotConfig:
    """`tokentop plot RESULTS`'s flags; an ``--output`` that is not an SVG is a `UsageError`."""
    out = Path(ns.output) if ns.output else None
    if out is not None and out.suffix.lower() != ".svg":
        raise UsageError(f"--output {out}: the plot is SVG: give a name ending in .svg")
    return PlotConfig(source=Path(ns.results), out=out)


def add_export_args(p: argparse.ArgumentParser) -> None:
    """`tokentop export RESULTS --to FORMAT [...]`."""
    p.add_argument("results", metavar="RESULTS", help=RESULTS_HELP)
    p.add_argument(
        "--to",
        required=True,
        choices=EXPORTS,
        help="vllm: one vllm-bench-serve JSON per level (a folder); csv: the level table; llmd: llm-d "
        "Benchmark Report v0.2 per level (a folder); aiperf: AIPerf's per-request profile_export.jsonl; "
        "mooncake: a session's requests as a Mooncake trace",
    )
    add_output_arg(p, metavar="PATH", help="file or folder to write (default: beside RESULTS)")
    p.add_argument(
        "--append",
        action="store_true",
        help="with --to vllm: vLLM's --append-result layout, one line per level appended to one file",
    )
    p.add_argument(
        "--requests-log",
        metavar="FILE",
        help="with --to aiperf: the run's --requests-log, which holds the per-request records",
    )


def export_config(ns: argparse.Namespace) -> ExportConfig:
    """`tokentop export RESULTS --to ...`'s flags; a flag the export cannot use, or one it needs and was not
    given (AIPerf's per-request records), is a `UsageError`."""
    if ns.append and ns.to != "vllm":
        raise UsageError("--append is vLLM's --append-result layout: only with --to vllm")
    if ns.to == "aiperf" and not ns.requests_log:
        raise UsageError(
            "--to aiperf needs the per-request records, which the results file does not hold: give the run's "
            "--requests-log FILE (bench and the app write it with --requests-log)"
        )
    return ExportConfig(
        source=Path(ns.results),
        to=ns.to,
        out=Path(ns.output) if ns.output else None,
        append=ns.append,
        requests_log=Path(ns.requests_log) if ns.requests_log else None,
    )


def _fail(message: str, status: int = 1) -> int:
    print(f"tokentop: error: {message}", file=sys.stderr)
    return status


def _read(path: Path) -> Results:
    """A results file, or a session's results rebuilt by replaying it."""
    from tui.engine.results.files import ResultsFileError, read_results
    from tui.engine.sessions.trace_export import is_session, session_results

    if is_session(path):
        try:
            return session_results(path)
        except SessionError as exc:
            raise ResultsFileError(str(exc)) from None
    return read_results(path)


def run_plot(config: PlotConfig) -> int:
    """The SVG plot of the saved run (to ``config.out``, default beside it); its path on stdout."""
    from tui.engine.results.files import ResultsFileError
    from tui.engine.results.plot import write_plot

    out = config.out or config.source.with_suffix(".svg")
    try:
        write_plot(_read(config.source), out)
    except ResultsFileError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write the plot {out}: {exc.strerror or exc}")
    print(out)
    return 0


def _default_out(source: Path, to: ExportFormat, append: bool) -> Path:
    stem = source.with_suffix("")
    if to == "vllm":
        return stem.with_name(stem.name + ("-vllm.jsonl" if append else "-vllm"))
    if to == "csv":
        return source.with_suffix(".csv")
    if to == "llmd":
        return stem.with_name(stem.name + "-llmd")
    if to == "mooncake":
        return source.with_name(
            source.name.removesuffix(".gz").removesuffix(".tokentop-session") + "-mooncake.jsonl"
        )
    return source.with_name("profile_export.jsonl")


def run_export(config: ExportConfig) -> int:
    """One export (``config.to``: vllm, csv, llmd, aiperf, mooncake) of the saved run; each path written on
    stdout, what was left out on stderr."""
    source, to, append, requests_log = config.source, config.to, config.append, config.requests_log
    out = config.out or _default_out(source, to, append)
    if to == "mooncake":
        return mooncake_command(source, out)
    from tui.engine.results.aiperf import RequestsLogError, write_aiperf
    from tui.engine.results.csv import write_csv
    from tui.engine.results.files import ResultsFileError
    from tui.engine.results.llmd import write_llmd_reports
    from tui.engine.results.vllm import append_vllm_results, write_vllm_results

    try:
        results = _read(source)
        if to == "vllm":
            written = [append_vllm_results(results, out)] if append else write_vllm_results(results, out)
        elif to == "csv":
            written = [write_csv(results, out)]
        elif to == "llmd":
            written = write_llmd_reports(results, out)
        else:
            assert requests_log is not None  # `export_config` refuses it
            export = write_aiperf(results, requests_log, out)
            written = [out]
            if not export.lines:
                print(f"tokentop: warning: {requests_log} holds no request of these results", file=sys.stderr)
            if export.malformed:
                print(f"tokentop: note: {export.malformed} malformed line(s) skipped", file=sys.stderr)
            if export.other_run:
                print(
                    f"tokentop: note: {export.other_run} request(s) of other runs' levels left out",
                    file=sys.stderr,
                )
    except (ResultsFileError, RequestsLogError) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write {out}: {exc.strerror or exc}")
    for path in written:
        print(path)
    return 0


def mooncake_command(source: Path, out: Path) -> int:
    """``tokentop export SESSION --to mooncake``: the trace at ``out``, its path on stdout."""
    from tui.engine.sessions.trace_export import is_session, to_mooncake

    if not is_session(source):
        print(f"tokentop: error: {source}: --to mooncake needs a session (the results file holds no "
              "requests)", file=sys.stderr)  # fmt: skip
        return 1
    try:
        lines = to_mooncake(source)
        out.write_text("".join(line + "\n" for line in lines))
    except SessionError as exc:
        print(f"tokentop: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tokentop: error: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(out)
    return 0
