"""When the server stopped answering and when it came back: outages as spans, not a pile of failures.

A server that restarts fails every request for a while: the streams in flight break, the next connections
are refused (or a proxy in front answers 502/503). Counted one by one, that reads as a failing server and
its silence is averaged into the level. So, after the server has answered once (a success, or a stream it
answered before it broke: a slow server's first streams may all end so), failures that say it is gone
and go on for more than `OUTAGE_AFTER_S` with no success between open an outage from the first of them.
The first answer begun after that closes it, at its first byte: a success's, or a 2xx head of a stream cut
or cancelled (a slow server's first answers may not end before the run does). The levels take the spans
out of their rates (`tui.engine.aggregate.levels`), the results list them, the faces say them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tui.engine.records import RequestRecord
from tui.engine.snapshot import LevelView, Outage
from tui.units import elapsed

OUTAGE_AFTER_S = 1.0
"""Failures saying the server is gone for longer than this, and none succeeding, make an outage."""
GONE_CLASSES = frozenset({"connect", "disconnect"})
"""Failure classes that say no server answered (refused, reset, closed mid-stream)."""
GONE_STATUSES = frozenset({502, 503})
"""HTTP answers that say the server behind a proxy (or the server itself) is not serving."""


@dataclass
class _Span:
    start_ns: int
    end_ns: int | None
    cause: str


def gone(rec: RequestRecord) -> bool:
    """The record's failure says the server is not answering."""
    return rec.status == "error" and (rec.error_class in GONE_CLASSES or rec.http_status in GONE_STATUSES)


def cause_of(rec: RequestRecord) -> str:
    """A failure in a few words: "connect", "HTTP 503"."""
    return f"HTTP {rec.http_status}" if rec.http_status in GONE_STATUSES else str(rec.error_class)


class Outages:
    """The run's outages, from its finished records in (roughly) the order they end."""

    def __init__(self, t0_ns: int) -> None:
        self.t0_ns = t0_ns
        self.spans: list[_Span] = []
        self._seen_up = False
        self._first_gone_ns: int | None = None
        """End of the first failure of the present run of them (None: the last record succeeded)."""
        self.version = 0
        """Bumped on every change to ``spans`` (a level's figures depend on them)."""

    @property
    def down(self) -> bool:
        """An outage is open now."""
        return bool(self.spans) and self.spans[-1].end_ns is None

    def see(self, rec: RequestRecord) -> str | None:
        """Learn from one finished record; a line to say when an outage begins or ends, else None."""
        if rec.status == "ok":
            self._seen_up = True
            if self._first_gone_ns is not None and rec.end_ns < self._first_gone_ns:
                return None  # an earlier success reported late
            if not self.down:
                self._first_gone_ns = None
                return None
            return self._back(rec.first_byte_ns if rec.first_byte_ns is not None else rec.end_ns)
        if rec.first_byte_ns is not None and rec.http_status is not None and 200 <= rec.http_status < 300:
            self._seen_up = True  # answered, then cut: on a slow server the first streams end so
            if self.down and rec.first_byte_ns > self.spans[-1].start_ns:
                return self._back(rec.first_byte_ns)  # its answer began after the outage: the server is back
        if not self._seen_up or not gone(rec) or self.down:
            return None
        if self._first_gone_ns is None:
            self._first_gone_ns = rec.end_ns
            return None
        if rec.end_ns - self._first_gone_ns <= OUTAGE_AFTER_S * 1e9:
            return None
        self.spans.append(_Span(self._first_gone_ns, None, cause_of(rec)))
        self.version += 1
        return f"the server stopped answering at {self._clock(self._first_gone_ns)} ({cause_of(rec)})"

    def _back(self, answered_ns: int) -> str:
        """Close the open outage where the server answered again; the line that says so."""
        self._first_gone_ns = None
        span = self.spans[-1]
        span.end_ns = max(span.start_ns, answered_ns)
        self.version += 1
        down_s = (span.end_ns - span.start_ns) / 1e9
        return f"the server is back at {self._clock(span.end_ns)} (down {down_s:.1f} s)"

    def _clock(self, t_ns: int) -> str:
        return elapsed((t_ns - self.t0_ns) / 1e9)

    def down_ns(self, from_ns: int, to_ns: int, now_ns: int) -> int:
        """Nanoseconds of [from_ns, to_ns) inside an outage (an open one runs to ``now_ns``)."""
        total = 0
        for span in self.spans:
            end = now_ns if span.end_ns is None else span.end_ns
            total += max(0, min(end, to_ns) - max(span.start_ns, from_ns))
        return total

    def views(self) -> tuple[Outage, ...]:
        """The spans in run seconds, as a snapshot carries them."""
        return tuple(
            Outage(
                start_s=(s.start_ns - self.t0_ns) / 1e9,
                end_s=None if s.end_ns is None else (s.end_ns - self.t0_ns) / 1e9,
                cause=s.cause,
            )
            for s in self.spans
        )


def without_outages(view: LevelView, outages: tuple[Outage, ...], now_s: float) -> LevelView:
    """``view`` with the time its window held an outage taken out of its rates (throughput and goodput
    alike, the SLO's too), ``down_s`` set and the level not steady; unchanged when its window held none.
    The latency figures are the successful requests' own and need no change; the SLO attainment is a
    share of the window's requests, the failed ones of the outage among them, and stays so."""
    if not outages or view.window_from_s is None or view.window_to_s is None:
        return view
    lo, hi = view.window_from_s, view.window_to_s
    down_s = sum(
        max(0.0, min(now_s if o.end_s is None else o.end_s, hi) - max(o.start_s, lo)) for o in outages
    )
    if down_s <= 0:
        return view
    up_s = view.window_s - down_s
    scale = view.window_s / up_s if up_s > 0 else math.nan
    return replace(
        view,
        steady=False,
        down_s=down_s,
        output_tps=view.output_tps * scale,
        request_per_s=view.request_per_s * scale,
        total_tps=view.total_tps * scale,
        goodput_per_s=None if view.goodput_per_s is None else view.goodput_per_s * scale,
        slo=None
        if view.slo is None
        else replace(
            view.slo, goodput_rps=view.slo.goodput_rps * scale, goodput_tps=view.slo.goodput_tps * scale
        ),
    )
