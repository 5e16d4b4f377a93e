"""The commands over recorded sessions: ``tokentop sessions`` (list), ``replay`` and ``compare``, each its
flags, the reader into its typed config (`tui.configs`) and its run; a bad file is one line and exit 1."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

from tui import units
from tui.argtypes import positive_float
from tui.cli.record import find_runs, sessions_dir
from tui.configs import CompareConfig, CompareForm, ReplayConfig, SessionsConfig, UsageError
from tui.engine.recording.file import SUFFIX, SessionError, session_files

C = TypeVar("C")


def add_sessions_args(p: argparse.ArgumentParser) -> None:
    """`tokentop sessions`: ``--dir``."""
    p.add_argument("--dir", metavar="DIR", help="where to look (default: the sessions folder)")


def sessions_config(ns: argparse.Namespace) -> SessionsConfig:
    """`tokentop sessions`: ``--dir``, or the folder every run records into by default."""
    return SessionsConfig(folder=Path(ns.dir) if ns.dir else sessions_dir())


def add_replay_args(p: argparse.ArgumentParser) -> None:
    """`tokentop replay SESSION`: ``--theme``, ``--speed``."""
    p.add_argument("session", metavar="SESSION", help=f"a session tokentop recorded (*{SUFFIX})")
    p.add_argument("--theme", default=None, metavar="NAME|PATH", help="theme name or theme file")
    p.add_argument("--speed", type=float, default=ReplayConfig.speed, metavar="X", help="play X times faster")


def replay_config(ns: argparse.Namespace) -> ReplayConfig:
    """`tokentop replay SESSION`'s flags."""
    return ReplayConfig(session=Path(ns.session), theme=ns.theme, speed=ns.speed)


def add_compare_args(p: argparse.ArgumentParser) -> None:
    """`tokentop compare RUN RUN...`: ``--threshold``, ``--plot``, and ``--markdown`` or ``--json``."""
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="sessions (a path, a file name or label in the sessions folder) or results files; the first is "
        "the base; A,B,... is one side made of repeated runs; one bench --ab results file: its A and B",
    )
    p.add_argument(
        "--threshold",
        type=positive_float,
        default=CompareConfig.threshold_pct,
        metavar="PCT",
        help="the smallest change that is better/worse, in percent",
    )
    p.add_argument("--plot", metavar="PATH.svg", help="also write both curves to this SVG")
    p.add_argument(
        "--no-repeat-sets",
        action="store_true",
        help="a results file or session of a bench --repeat set is that run alone (by default: the whole set "
        "beside it)",
    )
    form = p.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="a Markdown table (for a pull request)")
    form.add_argument("--json", action="store_true", help="the comparison as JSON")


def compare_config(ns: argparse.Namespace) -> CompareConfig:
    """`tokentop compare RUN RUN...`'s flags; no run, or one made of repeats, is a `UsageError` (one
    results file of ``bench --ab`` holds both sides)."""
    if len(ns.runs) < 2 and "," in "".join(ns.runs):
        raise UsageError("compare needs at least two runs")
    form: CompareForm = "json" if ns.json else "markdown" if ns.markdown else "text"
    sides = tuple(tuple(p for part in run.split(",") if part for p in find_runs(part)) for run in ns.runs)
    notes: tuple[str, ...] = ()
    if len(sides) > 1 and not ns.no_repeat_sets:
        sides, notes = repeat_sets(sides)
    return CompareConfig(
        runs=sides,
        form=form,
        plot=Path(ns.plot) if ns.plot else None,
        threshold_pct=ns.threshold,
        notes=notes,
    )


def _repeat_of(path: Path) -> tuple[str, int, int] | None:
    """A results file's place in a ``bench --repeat`` set (its ``repeat``: set id, run, runs), or None: a
    session, a single run, or a file compare will say it cannot read."""
    try:
        with path.open("rb") as f:
            if f.read(1) != b"{":  # a session
                return None
            doc = json.loads(b"{" + f.read())
    except (OSError, ValueError):
        return None
    rep = doc.get("repeat") if isinstance(doc, dict) else None
    if not isinstance(rep, dict):
        return None
    the_set, run, runs = rep.get("set_id"), rep.get("run"), rep.get("runs")
    if not isinstance(the_set, str) or not isinstance(run, int) or not isinstance(runs, int) or runs < 2:
        return None
    return the_set, run, runs


def _set_of(path: Path) -> tuple[str, tuple[Path, ...], int] | None:
    """The ``bench --repeat`` set ``path`` is one run of: its id, its runs found beside it (results files
    by their numbered names, `tui.bench.repeats.repeat_path`, carrying the id; sessions in the same folder
    whose header names it), and how many runs the set had (as found, for sessions). None: a single run."""
    from tui.bench.repeats import repeat_path, unnumbered
    from tui.engine.recording.file import SUFFIX, read_header, session_files

    if path.name.endswith(SUFFIX):
        the_set = (read_header(path) or {}).get("repeat")
        if not isinstance(the_set, str) or not the_set:
            return None
        found = [p for p in session_files(path.parent) if (read_header(p) or {}).get("repeat") == the_set]
        return the_set, tuple(found) or (path,), max(len(found), 1)
    got = _repeat_of(path)
    if got is None:
        return None
    the_set, run, runs = got
    base = unnumbered(path, run)
    numbered = [] if base is None else [repeat_path(base, k) for k in range(1, runs + 1)]
    found = [p for p in numbered if p == path or (p.is_file() and (_repeat_of(p) or ("",))[0] == the_set)]
    return the_set, tuple(found), runs


Sides = tuple[tuple[Path, ...], ...]


def repeat_sets(sides: Sides) -> tuple[Sides, tuple[str, ...]]:
    """Each side that is one run of a ``bench --repeat`` set (a results file or a session given by path),
    as the whole set found beside it (`_set_of`); and a line per such side saying so. Not where another
    side holds a run of the same set: then each is compared as given, run against run."""
    of = {p: _set_of(p) for side in sides for p in side}
    sets = [{got[0] for got in (of[p] for p in side) if got is not None} for side in sides]
    holders = Counter(s for held in sets for s in held)
    out: list[tuple[Path, ...]] = []
    notes: list[str] = []
    for side in sides:
        got = of[side[0]] if len(side) == 1 else None
        if got is None:
            out.append(side)
            continue
        (path,), (the_set, found, runs) = side, got
        said = f"{path.name}: one of a set of {runs}, compared"
        if holders[the_set] > 1:
            notes.append(f"{said} alone (another side holds one of its set)")
        elif len(found) < 2:
            notes.append(f"{said} alone (no other run of its set beside it)")
        else:
            some = "" if len(found) == runs else f" ({len(found)} of them beside it)"
            notes.append(f"{said} as the set{some} (--no-repeat-sets: alone)")
            side = found
        out.append(side)
    return tuple(out), tuple(notes)


def _one_line(command: Callable[[C], int]) -> Callable[[C], int]:
    """``command`` with a file that cannot be read as a session reported in one line, exit 1."""

    def run(config: C) -> int:
        try:
            return command(config)
        except SessionError as exc:
            print(f"tokentop: error: {exc}", file=sys.stderr)
            return 1

    return run


@_one_line
def run_sessions(config: SessionsConfig) -> int:
    """The listing of ``config.folder``."""
    return list_sessions(config.folder)


@_one_line
def run_replay(config: ReplayConfig) -> int:
    """The live app's panes over the session (imported now: `tokentop --help` must not load Textual)."""
    from tui.app.playback import run_replay as replay

    return replay(config)


@_one_line
def run_compare(config: CompareConfig) -> int:
    """The comparison, as ``config.form`` says."""
    return compare_command(config)


# --- sessions -------------------------------------------------------------------------------------


def session_summary(path: Path) -> dict[str, Any]:
    """Date, label, URL, model, levels and knee of one session (from its results if it has them)."""
    from tui.engine.recording.file import read_session

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
    if key[0] == "trace":
        return f"x{key[1]:g} speed"
    return f"{key[1]:g} users" if key[0] == "concurrency" else f"{key[1]:g} req/s"


def capacity_words(caps: list[dict[str, Any]]) -> str:
    """A side's capacity at SLO (``capacity_at_slo`` of each of its runs): "24 users (880 tok/s)"; over
    repeats, the range of their loads and their mean goodput; "none of its levels" where none met it."""
    met = [c for c in caps if c.get("level_id") is not None and isinstance(c.get("value"), int | float)]
    if not met:
        return "none of its levels"
    mode = met[0].get("mode") or "concurrency"
    low, high = min(c["value"] for c in met), max(c["value"] for c in met)
    words = (
        _load_name((mode, low)) if low == high else f"{_load_name((mode, low))} to {_load_name((mode, high))}"
    )
    goodput = [c["output_goodput"] for c in met if isinstance(c.get("output_goodput"), int | float)]
    if goodput:
        words += f" ({sum(goodput) / len(goodput):,.0f} tok/s)"
    return words + (f" in {len(met)} of its {len(caps)} runs" if len(met) < len(caps) else "")


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
        if (cap := pair.get("capacity")) is not None:
            lines.append(f"capacity at SLO: {pair['base']} serves {capacity_words(cap['base'])}, "
                         f"{pair['other']} {capacity_words(cap['other'])}")  # fmt: skip
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
    """The comparison on stdout in ``config.form`` (after a line per side taken as a repeat set); warnings on
    stderr unless it is JSON."""
    from tui.engine.sessions.ab import saved_comparison
    from tui.engine.sessions.compare import comparison

    if len(config.runs) == 1:  # one `bench --ab` results file: its two sides as they were judged
        data = saved_comparison(config.runs[0][0])
    else:
        data = comparison(list(config.runs), config.threshold_pct)
    if config.plot is not None:
        from tui.engine.sessions.compare_plot import curves_svg

        config.plot.write_text(curves_svg(data["curves"]))
    if config.form == "json":
        print(json.dumps({**data, "notes": list(config.notes)}, default=_plain, indent=1))
    else:
        for w in data["warnings"]:
            print(f"tokentop: warning: {w}", file=sys.stderr)
        for note in config.notes:
            print(note)
        print(format_comparison(data, markdown=config.form == "markdown"))
        if config.form == "text":
            from tui.engine.sessions.compare_plot import curves_text

            print()
            print(curves_text(data["curves"]))
    return 0
