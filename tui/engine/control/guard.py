"""When to stop issuing on purpose: a configuration error that every further request would repeat.

Three such errors: the server keeps rejecting our credentials (HTTP 401/403), the TLS handshake keeps failing
(a certificate that does not verify, a protocol the server does not speak: class ``tls``), or the server
stopped serving the model (HTTP 404 naming it: unloaded, swapped, renamed mid-run). Going on only
hammers the server (without this, the live app would send a rejected key at hundreds of requests per second
under its "every request fails" banner) and measures nothing. The handle feeds every finished record here,
across all workers in the order they reached it; a few of the same error in a row with no success in between
trip the guard once, and the handle then pauses every worker through the wire. The message names the flag or
the certificate problem, never the key.
"""

from __future__ import annotations

from collections.abc import Iterable

from tui.engine.records import RequestRecord
from tui.engine.snapshot import LevelView, Outage
from tui.units import clock, elapsed

AUTH_FATAL_AFTER = 3
"""Rejections (HTTP 401/403) in a row, with no success among them, that stop the load."""
TLS_FATAL_AFTER = 3
"""TLS failures in a row, with no success among them, that stop the load (a certificate does not fix
itself; a few, not one, so a single broken handshake on a healthy server passes)."""
MODEL_GONE_AFTER = 3
"""HTTP 404s naming the model in a row, with no success among them, that stop the load (a model that
went away mid-run is not an outage: the server answers, and every further request would get the same)."""
AUTH_STATUSES = (401, 403)


def names_model(rec: RequestRecord, model: str) -> bool:
    """The failure is the server saying it does not serve ``model``: a 404 whose message names it (vLLM,
    OpenAI: "The model `X` does not exist"; Ollama: 'model "X" not found')."""
    return rec.status == "error" and rec.http_status == 404 and bool(model) and model in (rec.error or "")


class ConfigGuard:
    """Counts credential rejections, TLS failures and 404s naming the model, each in a row; a success resets
    them, other failures leave them."""

    def __init__(
        self,
        *,
        has_key: bool,
        model: str = "",
        after: int = AUTH_FATAL_AFTER,
        tls_after: int = TLS_FATAL_AFTER,
        model_after: int = MODEL_GONE_AFTER,
    ) -> None:
        self.has_key = has_key
        self.model = model
        self.model_after = model_after
        self.model_in_a_row = 0
        """404s naming the model in a row."""
        self.after = after
        self.tls_after = tls_after
        self.in_a_row = 0
        """Credential rejections in a row."""
        self.tls_in_a_row = 0
        self.served = False
        """Some request succeeded: only then can the model have gone away (a model 404'd from the first
        request is the store's "every request fails", with the server's own words)."""
        self.tripped = False

    def see(self, records: Iterable[RequestRecord]) -> str | None:
        """Feed finished records; the one-line reason the first time the guard trips, else None."""
        if self.tripped:
            return None
        status = 0
        tls_error = ""
        for rec in records:
            if rec.status == "ok":
                self.in_a_row = self.tls_in_a_row = self.model_in_a_row = 0
                self.served = True
            elif names_model(rec, self.model):
                self.model_in_a_row += 1
            elif rec.status == "error" and rec.http_status in AUTH_STATUSES:
                self.in_a_row += 1
                status = rec.http_status
            elif rec.status == "error" and rec.error_class == "tls":
                self.tls_in_a_row += 1
                tls_error = rec.error or "TLS handshake failed"
        if self.in_a_row >= self.after:
            self.tripped = True
            what = (
                "the API key was rejected"
                if self.has_key
                else "the server wants an API key and none was given"
            )
            return (
                f"{what} (HTTP {status}, {self.in_a_row} requests in a row): load stopped; "
                "check --api-key or $OPENAI_API_KEY"
            )
        if self.served and self.model_in_a_row >= self.model_after:
            self.tripped = True
            return (
                f"the server no longer serves model {self.model} (HTTP 404 on {self.model_in_a_row} requests "
                "in a row): load stopped"
            )
        if self.tls_in_a_row >= self.tls_after and tls_error:
            self.tripped = True
            return f"load stopped after {self.tls_in_a_row} requests in a row failed: {tls_error}"
        return None


PERSISTENT_S = 5.0
"""A level failing this long with no success at all has a broken server, not a slow one: bench ends it."""
PERSISTENT_FAILURES = 8
"""...provided at least this many of its requests failed (one user backing off from 50 ms to its 5 s cap
has failed 8 times in about 5 s)."""


OUTAGE_WAIT_S = 300.0
"""How long bench waits out an outage before it stops the run (a real vLLM server took 2 minutes to come
back from a restart)."""


def open_outage(outages: tuple[Outage, ...]) -> Outage | None:
    """The outage going on now, if any (`tui.engine.aggregate.outages`)."""
    return outages[-1] if outages and outages[-1].end_s is None else None


def outage_outlasted(outages: tuple[Outage, ...], now_s: float, wait_s: float | None = None) -> str | None:
    """Why the run should stop: the server has not answered for longer than ``wait_s`` (default
    `OUTAGE_WAIT_S`); else None (no outage, or one still worth waiting out)."""
    span = open_outage(outages)
    limit_s = OUTAGE_WAIT_S if wait_s is None else wait_s
    if span is None or now_s - span.start_s < limit_s:
        return None
    return (
        f"the server stopped answering at {elapsed(span.start_s)} ({span.cause}) and has not answered "
        f"for {clock(now_s - span.start_s)}: run stopped"
    )


def down_s_since(outages: tuple[Outage, ...], from_s: float, now_s: float) -> float:
    """Seconds of [from_s, now_s] inside an outage (an open one runs to ``now_s``): what a timed level
    adds to its time, so it measures its duration with the server up."""
    return sum(
        max(0.0, min(now_s if o.end_s is None else o.end_s, now_s) - max(o.start_s, from_s)) for o in outages
    )


def persistent_failure(level: LevelView, elapsed_s: float, outages: tuple[Outage, ...] = ()) -> str | None:
    """Why ``level`` should end now (one line: how long, how many, of which classes), or None.

    Peers end a run whose every request fails; tokentop's users back off (`tui.engine.load.backoff`), so
    waiting for ``--requests`` failures against an always-failing server took minutes. A server in an
    outage (it answered before, then stopped: ``outages``' last span is open) is not a broken level but a
    span to wait out (`outage_outlasted` bounds it): a level started inside one is not ended here."""
    if open_outage(outages) is not None:
        return None
    if level.completed or level.failed < PERSISTENT_FAILURES or elapsed_s < PERSISTENT_S:
        return None
    classes = ", ".join(f"{k} {v}" for k, v in sorted(level.errors, key=lambda kv: -kv[1]))
    return f"every request failed for {elapsed_s:.0f} s, none completed ({level.failed} failed: {classes})"
