"""When to stop issuing on purpose: the server keeps rejecting our credentials.

HTTP 401/403 is a configuration error, not load: every further request is rejected the same way, so going
on only hammers the server (the live app used to send the rejected key at hundreds of requests per second
under its "every request fails" banner). The handle feeds every finished record here, across all workers in
the order they reached it; a few rejections in a row with no success in between trip the guard once, and
the handle then pauses every worker through the wire. The message names the flag, never the key.
"""

from __future__ import annotations

from collections.abc import Iterable

from tui.engine.records import RequestRecord

AUTH_FATAL_AFTER = 3
"""Rejections (HTTP 401/403) in a row, with no success among them, that stop the load."""
AUTH_STATUSES = (401, 403)


class AuthGuard:
    """Counts credential rejections in a row; a success resets the count, other failures leave it."""

    def __init__(self, *, has_key: bool, after: int = AUTH_FATAL_AFTER) -> None:
        self.has_key = has_key
        self.after = after
        self.in_a_row = 0
        self.tripped = False

    def see(self, records: Iterable[RequestRecord]) -> str | None:
        """Feed finished records; the one-line reason the first time the guard trips, else None."""
        if self.tripped:
            return None
        status = 0
        for rec in records:
            if rec.status == "ok":
                self.in_a_row = 0
            elif rec.status == "error" and rec.http_status in AUTH_STATUSES:
                self.in_a_row += 1
                status = rec.http_status
        if self.in_a_row < self.after:
            return None
        self.tripped = True
        what = (
            "the API key was rejected" if self.has_key else "the server wants an API key and none was given"
        )
        return (
            f"{what} (HTTP {status}, {self.in_a_row} requests in a row): load stopped; "
            "check --api-key or $OPENAI_API_KEY"
        )
