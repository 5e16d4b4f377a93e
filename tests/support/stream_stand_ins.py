"""Stand-ins for what a stream's exchange talks to, so a recorded answer can be fed through the real
`tui.engine.stream.protocol_request` exchange without a socket or a worker (the fast-path tests and the
parse benchmark share them)."""

from __future__ import annotations

from collections.abc import Callable

from tui.engine.stream.failures import EventApplier
from tui.engine.stream.openai import apply_chunk


class NullWire:
    """Stands for the socket: the exchange writes its request and may drop the connection."""

    def write(self, data: bytes) -> None:
        return None

    def abort(self) -> None:
        return None


class StreamSession:
    """Stands for the worker's session: the API's event applier, nothing scrubbed, notices printed."""

    def __init__(self, apply: EventApplier = apply_chunk) -> None:
        self.fixed_osl_fields = False
        self.notice: Callable[[str], None] = print
        self.apply_event: EventApplier = apply
        self.whole_answer = False

    def scrub(self, text: str) -> str:
        return text
