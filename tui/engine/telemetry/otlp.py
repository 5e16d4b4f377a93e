"""A span per finished request for an OpenTelemetry collector, over OTLP/HTTP (``--otlp-endpoint``).

Made from the finished records, as the requests log is: per request, never per chunk, on the handle's reader
thread; the SDK's batch processor sends them from its own thread. Each span has the ids the request's
``traceparent`` carried (`tui.engine.trace_context`), so a traced server's spans are its children. Attribute
names are OpenTelemetry's GenAI semantic conventions where one exists, ``tokentop.*`` otherwise. Needs the
``tokentop[otel]`` extra: this module is imported only when spans are asked for."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from tui import __version__
from tui.engine.records import RequestRecord
from tui.engine.trace_context import trace_ids

TRACES_PATH = "/v1/traces"
OPERATIONS = {"chat": "chat", "completions": "text_completion"}
"""tokentop's endpoint -> ``gen_ai.operation.name``."""
EXPORT_TIMEOUT_S = 5.0
"""How long one export may retry a collector that does not answer."""
FLUSH_AT_END_S = 2.0
"""How long the end waits for the last spans to be taken."""


def span_attributes(
    record: RequestRecord, *, model: str, endpoint: str, host: str, port: int | None, canary: bool = False
) -> dict[str, Any]:
    """The span's attributes: GenAI semantic-convention names where they exist, the rest ``tokentop.*``.
    A ``canary`` request (`tui.engine.host.canary`) is no level's: ``tokentop.canary`` instead of a level."""
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": OPERATIONS.get(endpoint, endpoint),
        "gen_ai.request.model": model,
        "server.address": host,
        "tokentop.request.id": record.client_request_id,
    }
    if canary:
        attrs["tokentop.canary"] = True
    else:
        attrs["tokentop.level.id"] = record.level_id
    if port is not None:
        attrs["server.port"] = port
    if record.input_tokens is not None:
        attrs["gen_ai.usage.input_tokens"] = record.input_tokens
    if record.output_tokens is not None:
        attrs["gen_ai.usage.output_tokens"] = record.output_tokens
    if record.cached_tokens is not None:
        attrs["gen_ai.usage.cache_read.input_tokens"] = record.cached_tokens
    if record.finish_reason:
        attrs["gen_ai.response.finish_reasons"] = (record.finish_reason,)
    ttft = record.ttft_ns
    if ttft is not None:
        attrs["gen_ai.response.time_to_first_chunk"] = ttft / 1e9
    if record.http_status is not None:
        attrs["http.response.status_code"] = record.http_status
    if record.status != "ok":
        attrs["error.type"] = record.error_class or record.status
    return attrs


class _Reporting(SpanExporter):
    """The OTLP exporter, whose first failed export becomes one notice (the SDK's own log lines would land
    on the terminal the app draws on, so they are silenced)."""

    def __init__(self, inner: SpanExporter, where: str, on_notice: Callable[[str], None]) -> None:
        self._inner = inner
        self._where = where
        self._on_notice = on_notice
        self._said = False
        self._shut = False
        self._lock = threading.Lock()
        """`shutdown` comes from the end's timer and from the processor: the exporter is shut once."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._inner.export(spans)
        if result is not SpanExportResult.SUCCESS and not self._said:
            self._said = True
            self._on_notice(f"cannot send spans to {self._where}: the collector did not take them")
        return result

    def shutdown(self) -> None:
        with self._lock:
            if self._shut:
                return
            self._shut = True
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class Spans:
    """The run's spans on their way to the collector: `add` the finished records, `close` at the end."""

    def __init__(
        self,
        endpoint: str,
        trace_key: str,
        *,
        base_url: str,
        endpoint_kind: str,
        on_notice: Callable[[str], None],
    ) -> None:
        """``endpoint``: the collector's base URL (``/v1/traces`` is added); ``base_url``: the server's, whose
        host and port the spans name (never its credentials); ``on_notice``: a failed export's one line."""
        logging.getLogger("opentelemetry").addHandler(logging.NullHandler())
        logging.getLogger("opentelemetry").propagate = False
        self._key = trace_key
        self._endpoint_kind = endpoint_kind
        server = urlsplit(base_url)
        self._host = server.hostname or ""
        self._port = server.port
        self._resource = Resource.create({"service.name": "tokentop", "service.version": __version__})
        self._scope = InstrumentationScope("tokentop", __version__)
        url = endpoint.rstrip("/") + TRACES_PATH
        exporter = OTLPSpanExporter(endpoint=url, timeout=EXPORT_TIMEOUT_S)
        where = urlsplit(url)._replace(netloc=urlsplit(url).netloc.rpartition("@")[2]).geturl()
        self._exporter = _Reporting(exporter, where, on_notice)
        self._processor = BatchSpanProcessor(
            self._exporter,
            schedule_delay_millis=1000,
            export_timeout_millis=EXPORT_TIMEOUT_S * 1e3,
        )
        self._wall_ns = time.time_ns() - time.perf_counter_ns()
        """Added to a ``perf_counter_ns`` stamp, the wall clock OTLP times are in."""
        self.model = ""
        """The model the spans name, set once resolved."""

    def add(self, records: Sequence[RequestRecord], *, canary: bool = False) -> None:
        """One span per record, queued for the batch processor (which drops past its queue's bound);
        ``canary``: the canary user's requests, marked so."""
        for record in records:
            self._processor.on_end(self._span(record, canary))

    def _span(self, record: RequestRecord, canary: bool) -> ReadableSpan:
        trace_id, span_id = trace_ids(self._key, record.worker, record.seq)
        context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        operation = OPERATIONS.get(self._endpoint_kind, self._endpoint_kind)
        status = (
            Status(StatusCode.UNSET)
            if record.status == "ok"
            else Status(StatusCode.ERROR, record.error_class or record.status)
        )
        return ReadableSpan(
            name=f"{operation} {self.model}".rstrip(),
            context=context,
            resource=self._resource,
            attributes=span_attributes(
                record,
                model=self.model,
                endpoint=self._endpoint_kind,
                host=self._host,
                port=self._port,
                canary=canary,
            ),
            kind=SpanKind.CLIENT,
            status=status,
            start_time=record.sent_ns + self._wall_ns,
            end_time=max(record.end_ns, record.sent_ns) + self._wall_ns,
            instrumentation_scope=self._scope,
        )

    def close(self) -> None:
        """Send what is queued, waiting at most `FLUSH_AT_END_S`, and stop the processor's thread: a collector
        that is away would otherwise hold the exit for its retries' whole timeout."""
        # the processor's own flush timeout does not bound an export that is retrying; shutting the exporter
        # down does: its retries stop and any later export fails at once
        give_up = threading.Timer(FLUSH_AT_END_S, self._exporter.shutdown)
        give_up.start()
        try:
            self._processor.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated
        finally:
            give_up.cancel()
