"""`tokentop plot RESULTS` and `tokentop export RESULTS --to ...`: a saved run's plot and exports, each made
by `tui.engine.results` from the file read back by its one reader, as a typed config (`tui.configs`) says.
A bad file or path is one line and exit 1; flags that do not fit together were refused in building it."""

from __future__ import annotations

import sys
from pathlib import Path

from tui.configs import ExportConfig, ExportFormat, PlotConfig
from tui.engine.results.aiperf import RequestsLogError, write_aiperf
from tui.engine.results.csv import write_csv
from tui.engine.results.files import ResultsFileError, read_results
from tui.engine.results.llmd import write_llmd_reports
from tui.engine.results.model import Results
from tui.engine.results.plot import write_plot
from tui.engine.results.vllm import append_vllm_results, write_vllm_results


def _fail(message: str, status: int = 1) -> int:
    print(f"tokentop: error: {message}", file=sys.stderr)
    return status


def _read(path: Path) -> Results:
    """A results file, or a session's results rebuilt by replaying it."""
    from tui.engine.recording.file import SessionError
    from tui.engine.sessions.trace_export import is_session, session_results

    if is_session(path):
        try:
            return session_results(path)
        except SessionError as exc:
            raise ResultsFileError(str(exc)) from None
    return read_results(path)


def run_plot(config: PlotConfig) -> int:
    """The SVG plot of the saved run (to ``config.out``, default beside it); its path on stdout."""
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
        from tui.session_commands import mooncake_command

        return mooncake_command(source, out)
    try:
        results = _read(source)
        if to == "vllm":
            written = [append_vllm_results(results, out)] if append else write_vllm_results(results, out)
        elif to == "csv":
            written = [write_csv(results, out)]
        elif to == "llmd":
            written = write_llmd_reports(results, out)
        else:
            assert requests_log is not None  # `tui.face_options.export_config` refuses it
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
