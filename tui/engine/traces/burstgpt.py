"""BurstGPT's CSV traces: ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``, the
timestamp in seconds from the trace's start; ``--trace-model`` keeps one model's requests only."""

from __future__ import annotations

from tui.engine.traces.csv_columns import Columns
from tui.engine.traces.protocol import TraceRequest, seconds_ns, whole

COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens")


class OtherModel(Exception):
    """A line of a model the filter leaves out: skipped without a notice."""


class BurstGptReader:
    """Columns by the header's names; ``model`` (case-insensitive) filters the lines."""

    def __init__(self, header: str, model: str | None = None, unit_ns: int = 1_000_000_000) -> None:
        self.columns = Columns(header, COLUMNS)
        self.model = model.lower() if model else None
        self.unit_ns = unit_ns

    def parse(self, line: str) -> TraceRequest:
        c = self.columns
        parts = c.fields(line)
        if self.model is not None and parts[c.index["Model"]].strip().lower() != self.model:
            raise OtherModel
        return TraceRequest(
            at_ns=seconds_ns("Timestamp", c.get(parts, "Timestamp"), self.unit_ns),
            input_tokens=whole("Request tokens", c.get(parts, "Request tokens")),
            output_tokens=whole("Response tokens", c.get(parts, "Response tokens")),
        )
