"""The commands over recorded sessions: ``tokentop sessions`` (list), ``replay`` and ``compare``, and a
session's Mooncake export; each takes its typed config (`tui.configs`, built by `tui.face_options`)."""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from tui import units
from tui.configs import CompareConfig, ReplayConfig, SessionCommandConfig, SessionsConfig
from tui.engine.sessions.file import SessionError, session_files


def run_session_command(config: SessionCommandConfig) -> int:
    """List, replay or compare, as ``config`` says; a bad file is one line on stderr and exit 1."""
    try:
        if isinstance(config, SessionsConfig):
            return list_sessions(config.folder)
        if isinstance(config, ReplayConfig):
            from tui.app.replay import run_replay

            return run_replay(config)
        return compare_command(config)
    except SessionError as exc:
        print(f"tokentop: error: {exc}", file=sys.stderr)
        return 1


# --- sessions -------------------------------------------------------------------------------------


def session_summary(path: Path) -> dict[str, Any]:
    """Date, label, URL, model, levels and knee of one session (from its results if it has them)."""
    from tui.engine.sessions.file import read_session

    s = read_session(path)
    model = next((e["model"] for e in s.of_kind("model")), "")
    levels = []
    for e in s.of_kind("level"):
        if e.get("op") == "begin":
            t = e["target"]["v"]
            names = s.header["schema"]["LoadTarget"]
            target = dict(zip(names, t, strict=False))
            levels.append(
                f"{target['concurrency']}u" if target["mode"] == "concurrency" else f"{target['rate']:g}/s"
            )
    results = next((e["doc"] for e in reversed(s.events) if e.get("k") == "results"), None)
    knee = None
    if results is not None:
        k = (results.get("saturation") or {}).get("knee")
        knee = None if k is None else k.get("value")
    return {
        "path": str(path),
        "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(s.header.get("started_at_s", 0))),
        "label": s.header.get("label", ""),
        "url": s.header.get("url", ""),
        "model": model,
        "levels": levels,
        "knee": knee,
        "cut": s.cut,
    }


def list_sessions(folder: Path) -> int:
    """One row per session in ``folder`` (a file that cannot be read says why in its row)."""
    paths = session_files(folder)
    if not paths:
        print(f"no sessions in {folder}")
        return 0
    print(f"{'date':16}  {'label':14}  {'url':28}  {'model':18}  {'knee':>6}  levels")
    for path in paths:
        try:
            s = session_summary(path)
        except SessionError as exc:
            print(f"{'?':16}  {exc}")
            continue
        levels = ",".join(s["levels"][:8]) + ("…" if len(s["levels"]) > 8 else "")
        knee = "-" if s["knee"] is None else f"{s['knee']:g}"
        cut = " (cut short)" if s["cut"] else ""
        print(f"{s['date']:16}  {s['label'][:14]:14}  {s['url'][:28]:28}  {s['model'][:18]:18}  "
              f"{knee:>6}  {levels}{cut}")  # fmt: skip
        print(f"  {path}")
    return 0


# --- compare --------------------------------------------------------------------------------------


def _plain(x: Any) -> Any:
    if is_dataclass(x) and not isinstance(x, type):
        return asdict(x)
    if isinstance(x, tuple):
        return list(x)
    raise TypeError(type(x).__name__)


def _load_name(key: list[Any] | tuple[Any, ...]) -> str:
    return f"{key[1]:g} users" if key[0] == "concurrency" else f"{key[1]:g} req/s"


def format_comparison(data: dict[str, Any], *, markdown: bool) -> str:
    """The comparison as a text (or Markdown) table per pair of runs (its warnings are the caller's)."""
    lines: list[str] = []
    for run in data["runs"]:
        knee = "-" if run["knee"] is None else f"{run['knee']:g}"
        cut = " (cut short: compared up to its cut)" if run["cut"] else ""
        lines.append(f"{run['path']}: model {run['model']}, knee {knee}{cut}")
    lines.append(f"noise: {data['noise']}")
    for pair in data["pairs"]:
        lines.append("")
        lines.append(f"{pair['other']} vs {pair['base']}")
        if not pair["levels"]:
            lines.append("no level of the same load in both")
        reasons = sorted({d.reason for lv in pair["levels"] for d in lv["differences"]
                          if d.verdict == "unjudged" and not d.metric.startswith("server ")})  # fmt: skip
        lines += [f"unjudged: {reason}" for reason in reasons]
        for level in pair["levels"]:
            lines.append("")
            errors = level["errors"]
            title = f"{_load_name(level['load'])}: errors {errors[0]} -> {errors[1]}"
            lines.append(f"### {title}" if markdown else title)
            if markdown:
                lines += ["| metric | base | other | change | verdict |", "|---|---:|---:|---:|---|"]
            for d in level["differences"]:
                pct = "-" if d.percent is None else f"{d.percent:+.1f} %"
                cells = (d.metric, units.figure(d.base), units.figure(d.other), pct, d.verdict)
                if markdown:
                    lines.append("| " + " | ".join(cells) + " |")
                else:
                    lines.append(f"  {cells[0]:14} {cells[1]:>10} {cells[2]:>10} {cells[3]:>10}  {cells[4]}")
    return "\n".join(lines)


def compare_command(config: CompareConfig) -> int:
    """The comparison on stdout in ``config.form``; warnings on stderr unless it is JSON."""
    import json

    from tui.engine.sessions.compare import comparison

    data = comparison(list(config.runs), config.threshold_pct)
    if config.plot is not None:
        from tui.engine.sessions.compare_plot import curves_svg

        config.plot.write_text(curves_svg(data["curves"]))
    if config.form == "json":
        print(json.dumps(data, default=_plain, indent=1))
    else:
        for w in data["warnings"]:
            print(f"tokentop: warning: {w}", file=sys.stderr)
        print(format_comparison(data, markdown=config.form == "markdown"))
        if config.form == "text":
            from tui.engine.sessions.compare_plot import curves_text

            print()
            print(curves_text(data["curves"]))
    return 0


# --- export ---------------------------------------------------------------------------------------


def mooncake_command(source: Path, out: Path) -> int:
    """``tokentop export SESSION --to mooncake``: the trace at ``out``, its path on stdout."""
    from tui.engine.sessions.exports import is_session, to_mooncake

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
