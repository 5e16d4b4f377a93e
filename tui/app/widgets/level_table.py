"""One table row per load level, updated in place (row key = level id)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable

from tui import units
from tui.app.widgets.styles import ComponentStyles
from tui.engine.aggregate.cost import joules_per_token, usd_per_mtok
from tui.engine.results.ab import AbLevel
from tui.engine.server_metrics.level_figures import LevelFigures, level_spans_ns
from tui.engine.server_metrics.view import ServerView
from tui.engine.sessions.ab import GOODPUT, SLO_METRIC
from tui.engine.snapshot import ITL_NAMES, ItlConvention, Knee, LevelView, Stats

COLUMNS: tuple[tuple[str, str], ...] = (
    ("level", "level"),
    ("tps", "tok/s"),
    ("ttft", "TTFT p50/90/99"),
    ("srv", "server run/wait/KV"),
    ("rps", "req/s"),
    ("ureq", "tok/s/req"),
    ("tpot", "TPOT p50/90/99"),
    ("itl", "ITL p50/90/99"),
    ("e2e", "E2E p50/90/99"),
    ("lag", "± lag"),
    ("err", "errors"),
    ("n", "done"),
    ("state", "state"),
    ("len", "ISL/OSL"),
    ("ttfa", "TTFA p50/90/99"),
)
"""Most important first, so 80 columns show the load, its throughput and TTFT without scrolling."""
WHOLE_ANSWER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("level", "level"),
    ("tps", "in tok/s"),
    ("e2e", "lat p50/90/99"),
    ("srv", "server run/wait/KV"),
    ("rps", "req/s"),
    ("err", "errors"),
    ("n", "done"),
    ("state", "state"),
    ("len", "ISL"),
)
"""An embeddings run's columns: no output, so input tok/s, the answer's latency, and no TTFT, ITL or OSL."""
BASE_COLUMN = ("base", "vs base tok/s/TTFT99")
"""With ``--baseline``: after tok/s, the change from the baseline's level at the same load."""
SLO_COLUMN = ("slo", "SLO met (95% CI) goodput")
"""With an SLO: after tok/s, the share of the window's requests that met it, its Wilson interval, and the
output tok/s of those requests."""
COST_COLUMN = ("cost", "$/Mtok")
"""With ``--cost-per-hour``: after tok/s, the price of a million output tokens at it."""
ENERGY_COLUMN = ("joule", "J/tok")
"""Once some level has the GPUs' energy over its window (a DCGM exporter's or NVML's counter): after
tok/s (and $/Mtok), the joules per output token at it, as the results' level saves it."""
CACHE_COLUMN = ("cache", "prefix cache")
"""Shown after ISL/OSL once some level has a hit rate (the server reports cached prompt tokens, per request
or in its counters)."""
AB_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ab_tps", "B tok/s vs A"),
    ("ab_ttft", "B TTFT p50 vs A"),
    ("ab_tpot", "B TPOT p50 vs A"),
    ("ab_itl", "B ITL p50 vs A"),
)
"""With ``--ab``: after tok/s, B's figure at the level, its change from A's and the verdict."""
AB_SLO_COLUMNS = (("ab_slo", "B SLO met vs A"), ("ab_goodput", "B goodput vs A"))
"""With an SLO too: B's attainment and its goodput (output tok/s that met the SLO) against A's."""
AB_METRICS = {"ab_tps": "output tok/s", "ab_ttft": "TTFT p50 ms", "ab_tpot": "TPOT p50 ms",
              "ab_itl": "ITL p50 ms", "ab_slo": SLO_METRIC, "ab_goodput": GOODPUT[0]}  # fmt: skip
"""Each A/B column's figure among the judged ones (`tui.engine.sessions.compare.METRICS`)."""
FIXED_COLUMNS = 1
"""The level column stays put when the table scrolls sideways, so every row still says its load."""
CELL_PADDING = 2
"""A DataTable column is its widest cell plus one space each side."""


FIT_PRIORITY = ("level", "tps", "ab_tps", "ab_ttft", "ab_tpot", "ab_itl", "ab_slo", "base", "slo", "cost",
                "joule", "ttft", "itl", "tpot", "e2e", "lag", "err", "rps", "srv", "ureq", "state", "n",
                "len", "cache", "ttfa")  # fmt: skip
"""Which columns a pane too narrow for all keeps first: the load, its throughput and latencies."""


def fitting(
    columns: tuple[tuple[str, str], ...], rows: list[dict[str, str]], width: int
) -> tuple[tuple[str, str], ...]:
    """The ``columns`` (in their order) that fit whole in ``width`` cells, taken by `FIT_PRIORITY` while
    each still fits (the level column always): a column cut at the pane's edge would show half a value."""
    need = {
        key: max([cell_len(label), *(cell_len(r[key]) for r in rows)]) + CELL_PADDING
        for key, label in columns
    }
    kept: set[str] = set()
    used = 0
    for key in sorted(need, key=lambda k: FIT_PRIORITY.index(k) if k in FIT_PRIORITY else len(FIT_PRIORITY)):
        if not kept or used + need[key] <= width:
            kept.add(key)
            used += need[key]
    return tuple(column for column in columns if column[0] in kept)


def triple(stats: Stats, name: str = "", uncertain: tuple[str, ...] = ()) -> str:
    """p50/p90/p99: `~` before one too few samples bound yet (`tui.engine.aggregate.intervals`), `*` after
    one the client's timing bound is 5 % or more of (``uncertain``: `LevelView.timing_uncertain`)."""
    if stats.n == 0:
        return "-"
    return "/".join(
        ("~" if stats.unbounded(q) else "")
        + units.ms_short(getattr(stats, q))
        + ("*" if f"{name}_{q}" in uncertain else "")
        for q in ("p50", "p90", "p99")
    )


ITL_JUDGED = {"chunk": "itl_chunk", "tpot": "tpot", "e2e": "itl_e2e"}
"""Each ITL convention's name among the figures a timing bound is judged against."""


def itl_stats(level: LevelView, convention: ItlConvention) -> Stats:
    return {"chunk": level.itl_chunk, "tpot": level.tpot, "e2e": level.itl_e2e}[convention]


def level_label(level: LevelView) -> str:
    if level.mode == "trace":
        return f"x{level.value:g}"
    return f"{level.value:g} users" if level.mode == "concurrency" else f"{level.value:g}/s"


def level_state(level: LevelView) -> str:
    """steady; settling while it runs; once ended, "unsteady" (rates over a window that never settled) or
    "short" (too short to measure: no rates, no curve point)."""
    if level.steady:
        return "steady"
    if level.ended_s is None:
        return "settling"
    return "short" if level.too_short else "unsteady"


def server_cell(means: Mapping[str, float | None] | None) -> str:
    """The server's own time-averaged running / waiting / KV use over a level ("-" where not reported), and
    its late scrapes of a slow /metrics when any ("late 2": those figures are older)."""
    if not means:
        return "-"
    run, wait, kv = means.get("running"), means.get("waiting"), means.get("kv_usage")
    parts = ["-" if v is None else f"{v:.1f}" for v in (run, wait)]
    parts.append("-" if kv is None else f"{kv:.0%}")
    late = means.get("late_scrapes")
    return "/".join(parts) + (f" late {late:.0f}" if late else "")


def server_means(
    view: ServerView | None,
    levels: tuple[LevelView, ...],
    t0_ns: int,
    now_ns: int,
    figures: LevelFigures[dict[str, float | None]] | None = None,
) -> dict[int, dict[str, float | None]]:
    """Per level, the server's gauges over its steady window (its span when it has none), by level id: the
    spans the results use (`level_spans_ns`). Keep one ``figures`` across calls, so a settled level's stay
    kept after the poller's ring has dropped its scrapes (`LevelFigures`)."""
    if view is None or not view.readings:
        return {}
    figures = figures if figures is not None else LevelFigures(ServerView.table_figures)
    return figures.of(view, level_spans_ns(levels, t0_ns, now_ns))


class ServerMeans:
    """The table's server gauges per level, recomputed only when a scrape or a level window came (the
    view is published whole, so a new scrape is a new view), with one `LevelFigures` across the run."""

    def __init__(self) -> None:
        self._key: object = None
        self._means: dict[int, dict[str, float | None]] = {}
        self._figures: LevelFigures[dict[str, float | None]] = LevelFigures(ServerView.table_figures)

    def of(
        self, view: ServerView | None, levels: tuple[LevelView, ...], t0_ns: int, now_ns: int
    ) -> dict[int, dict[str, float | None]]:
        """`server_means`, or what it last said while nothing it reads has changed."""
        key = (id(view), view.scrapes if view else 0, tuple((lv.level_id, lv.window_to_s) for lv in levels))
        if key != self._key:
            self._key = key
            self._means = server_means(view, levels, t0_ns, now_ns, self._figures)
        return self._means


def level_cells(
    level: LevelView,
    current_id: int,
    knee: Knee | None,
    convention: ItlConvention,
    server: Mapping[str, float | None] | None = None,
    base: Mapping[str, Any] | None = None,
    cost_per_hour: float | None = None,
    *,
    whole_answers: bool = False,
    ab: AbLevel | None = None,
) -> dict[str, str]:
    """Pure: the text of each cell of a level's row (``base``: the baseline's level at its load;
    ``cost_per_hour``: its price, USD; ``whole_answers``: embeddings, whose throughput is input tok/s and
    whose length the ISL alone; ``ab``: the level judged on both sides)."""
    marks = ("▶ " if level.level_id == current_id else "  ") + level_label(level)
    if knee is not None and knee.level_id == level.level_id:
        marks += " ◆"
    state = level_state(level)
    return {
        "level": marks,
        "state": state,
        "n": str(level.completed),
        "ttft": triple(level.ttft, "ttft", level.timing_uncertain),
        "tpot": triple(level.tpot, "tpot", level.timing_uncertain),
        "itl": triple(itl_stats(level, convention), ITL_JUDGED[convention], level.timing_uncertain),
        "e2e": triple(level.e2el, "e2el", level.timing_uncertain),
        "lag": lag_cell(level),
        "tps": units.rate(level.input_tps if whole_answers else level.output_tps),
        "rps": units.rate(level.request_per_s, 2),
        "ureq": units.rate(level.per_request_tps),
        "err": str(level.failed) if level.failed else "",
        "srv": server_cell(server),
        "len": lengths(level) if not whole_answers else units.rate(level.mean_isl, 0),
        "ttfa": triple(level.ttfa),
        "cache": cache_cell(level, server),
        "base": base_cell(level, base),
        "slo": slo_cell(level),
        "cost": units.dollars(usd_per_mtok(cost_per_hour, level.output_tps)),
        "joule": joule_cell(level, server),
        **{key: ab_cell(ab, metric) for key, metric in AB_METRICS.items()},
    }


def ab_cell(level: AbLevel | None, metric: str) -> str:
    """ "193.8 -41% worse": B's figure, its change from A's and the verdict ("-" before it is judged)."""
    d = None if level is None else next((d for d in level.differences if d.metric == metric), None)
    if d is None:
        return "-"
    b = ("-" if d.b is None else f"{d.b:.0%}") if metric == SLO_METRIC else units.figure(d.b)
    pct = "" if d.change_pct is None else f" {d.change_pct:+.0f}%"
    return f"{b}{pct} {d.verdict}"


def level_joules(level: LevelView, server: Mapping[str, float | None] | None) -> float | None:
    """The GPUs' energy over the level's window (``server``'s ``energy_j`` over ``energy_s``) per output
    token at its tok/s: the results' ``joules_per_output_token``; None without an energy reading."""
    server = server or {}
    return joules_per_token(server.get("energy_j"), server.get("energy_s"), level.output_tps)


def joule_cell(level: LevelView, server: Mapping[str, float | None] | None) -> str:
    """J per output token to three figures, as bench's table ("-" where there is none)."""
    joules = level_joules(level, server)
    return "-" if joules is None else f"{joules:.3g}"


def lag_cell(level: LevelView) -> str:
    """The client's timing bound over the level (its loop lag p99: every stamp ``±`` this, ``*`` where it
    is material), and "client" where the client limited the load there ("-" before a health window)."""
    if level.client_lag_ms is None:
        return "-"
    return f"{level.client_lag_ms:.1f}" + (" client" if level.client_limited else "")


def slo_cell(level: LevelView) -> str:
    """ "97% (93-99) 812": met share, its 95 % interval, goodput tok/s ("-" before any request)."""
    s = level.slo
    if s is None or not s.requests:
        return "-"
    return f"{s.attainment:.0%} ({s.low * 100:.0f}-{s.high * 100:.0f}) {units.rate(s.goodput_tps)}"


def base_cell(level: LevelView, base: Mapping[str, Any] | None) -> str:
    """The change of tok/s and TTFT p99 from the baseline's level at the same load ("-" with none)."""
    if base is None:
        return "-"
    from tui.engine.sessions.baseline import percent_change

    parts = []
    for now, key in ((level.output_tps, "output_throughput"), (level.ttft.p99, "p99_ttft_ms")):
        pct = percent_change(base.get(key), now)
        parts.append("-" if pct is None else f"{pct:+.0f}%")
    return " ".join(parts)


def cache_cell(level: LevelView, server: Mapping[str, float | None] | None = None) -> str:
    """The share of prompt tokens the server's prefix cache served: by the requests' ``cached_tokens``, else
    by the server's counters over the level (``server``); "warm" after it where prompts that share no prefix
    hit it (`LevelView.warm_cache`); "-" where neither reported any."""
    rate = level_hit_rate(level, server)
    if rate is None:
        return "-"
    return f"{rate:.0%}" + (" warm" if level.warm_cache else "")


def level_hit_rate(level: LevelView, server: Mapping[str, float | None] | None) -> float | None:
    """The level's prefix-cache hit rate: the requests' own count first, else the server's counters."""
    for rate in (level.cache_hit_rate, (server or {}).get("prefix_cache_hit_rate")):
        if rate is not None and math.isfinite(rate):
            return rate
    return None


def lengths(level: LevelView) -> str:
    """Achieved mean ISL/OSL by the server's count (set it against --isl/--osl)."""
    if not (math.isfinite(level.mean_isl) and math.isfinite(level.mean_osl)):
        return "-"
    return f"{level.mean_isl:.0f}/{level.mean_osl:.0f}"


class LevelTable(DataTable[Text]):
    """TTFT, TPOT, ITL and E2E at p50/p90/p99 in ms, and throughput, for each load level visited."""

    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | {"levels--knee", "levels--current", "levels--error"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.fixed_columns = FIXED_COLUMNS
        self._shown: dict[tuple[str, str], str] = {}
        self._followed = -1
        self.baseline: Callable[[LevelView], Mapping[str, Any] | None] | None = None
        """Set before mounting (``--baseline``): the baseline's level for a level, and its column shows."""
        self.cost_per_hour: float | None = None
        """Set before mounting (``--cost-per-hour``): the $/Mtok column shows."""
        self.ab: Callable[[LevelView], AbLevel | None] | None = None
        """Set before mounting (``--ab``): a level as judged on both sides, and the A/B columns show."""
        self.note = ""
        """Said after the title (``--ab`` with an SLO: each side's capacity at it)."""
        self._columns = COLUMNS
        """The columns shown, in order (`CACHE_COLUMN` joins them when a level first has a hit rate); in the
        wide layout only those that fit whole (`fitting`), the small one scrolls sideways instead."""
        self.component_style = ComponentStyles(self)

    def on_mount(self) -> None:
        for key, label in self._columns:
            self.add_column(label, key=key)
        self.app.theme_changed_signal.subscribe(
            self, lambda _theme: self._shown.clear()
        )  # restyle every cell

    def show(
        self,
        levels: tuple[LevelView, ...],
        current_id: int,
        knee: Knee | None,
        convention: ItlConvention,
        server: Mapping[int, Mapping[str, float | None]] | None = None,
        *,
        whole_answers: bool = False,
    ) -> bool:
        """Update rows in place; True if anything on screen changed. ``whole_answers``: an embeddings run
        (`WHOLE_ANSWER_COLUMNS`)."""
        changed = False
        title = f"load levels · ms · ITL = {ITL_NAMES[convention]}" + (f" · {self.note}" if self.note else "")
        if self.border_title != title:
            self.border_title = title
        every = WHOLE_ANSWER_COLUMNS if whole_answers else COLUMNS
        if any(level_hit_rate(lv, (server or {}).get(lv.level_id)) is not None for lv in levels):
            at = [key for key, _ in every].index("len") + 1
            every = (*every[:at], CACHE_COLUMN, *every[at:])  # beside ISL/OSL, not off at the far right
        if any(lv.slo is not None for lv in levels):  # beside tok/s: goodput is its share that met the SLO
            at = [key for key, _ in every].index("tps") + 1
            every = (*every[:at], SLO_COLUMN, *every[at:])
        if not whole_answers and any(
            (server or {}).get(lv.level_id, {}).get("energy_j") is not None for lv in levels
        ):
            at = [key for key, _ in every].index("tps") + 1  # beside tok/s, the rate it is per
            every = (*every[:at], ENERGY_COLUMN, *every[at:])
        if self.cost_per_hour is not None:  # beside tok/s, the rate it prices
            at = [key for key, _ in every].index("tps") + 1
            every = (*every[:at], COST_COLUMN, *every[at:])
        if self.baseline is not None:  # beside tok/s, the figure it compares first
            at = [key for key, _ in every].index("tps") + 1
            every = (*every[:at], BASE_COLUMN, *every[at:])
        if self.ab is not None:  # beside tok/s, B's figures against A's
            at = [key for key, _ in every].index("tps") + 1
            slo = AB_SLO_COLUMNS if any(lv.slo is not None for lv in levels) else ()
            every = (*every[:at], *AB_COLUMNS, *slo, *every[at:])
        baseline, ab = self.baseline, self.ab
        all_cells = {
            lv.level_id: level_cells(
                lv,
                current_id,
                knee,
                convention,
                (server or {}).get(lv.level_id),
                baseline(lv) if baseline is not None else None,
                self.cost_per_hour,
                whole_answers=whole_answers,
                ab=ab(lv) if ab is not None else None,
            )
            for lv in levels
        }
        width = self.scrollable_content_region.width
        wide = width > 0 and not self.screen.has_class("-compact")
        wanted = fitting(every, list(all_cells.values()), width) if wide else every
        if wanted != self._columns:
            self._set_columns(wanted, every)
            changed = True
        keys = [key for key, _ in self._columns]
        for level in levels:
            row = str(level.level_id)
            cells = all_cells[level.level_id]
            if row not in self.rows:
                self.add_row(
                    *(self._style(key, cells[key], level, current_id, knee) for key in keys), key=row
                )
                self._shown.update({(row, key): cells[key] for key in keys})
                changed = True
                continue
            for key in keys:
                value = cells[key]
                if self._shown.get((row, key)) != value:
                    self.update_cell(
                        row, key, self._style(key, value, level, current_id, knee), update_width=True
                    )
                    self._shown[(row, key)] = value
                    changed = True
        if current_id != self._followed and str(current_id) in self.rows and not self.has_focus:
            # A new level: put the cursor (and the view) on it, unless the user is browsing the table.
            self._followed = current_id
            self.move_cursor(row=self.get_row_index(str(current_id)), scroll=True)
        return changed

    @property
    def columns_shown(self) -> tuple[tuple[str, str], ...]:
        """(key, label) of each column on screen, in order."""
        return self._columns

    def _set_columns(self, columns: tuple[tuple[str, str], ...], every: tuple[tuple[str, str], ...]) -> None:
        """Rebuild the table with ``columns`` (a DataTable only appends columns); the border names what
        is left out for want of width."""
        self._columns = columns
        hidden = [label for key, label in every if (key, label) not in columns]
        self.border_subtitle = (
            f"not shown: {', '.join(hidden)} (wider terminal, or s saves all)" if hidden else ""
        )
        self.clear(columns=True)
        for key, label in self._columns:
            self.add_column(label, key=key)
        self._shown.clear()
        self._followed = -1

    def _style(self, key: str, value: str, level: LevelView, current_id: int, knee: Knee | None) -> Text:
        if key == "level" and knee is not None and knee.level_id == level.level_id:
            return Text(value, style=self.component_style("levels--knee"))
        if key == "level" and level.level_id == current_id:
            return Text(value, style=self.component_style("levels--current"))
        if key == "err" and value:
            return Text(value, style=self.component_style("levels--error"))
        return Text(value, justify="left" if key in ("level", "state") else "right")
