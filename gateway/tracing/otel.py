"""The OpenTelemetry SDK behind `gateway.tracing`: the one module that imports it.

One `TracerProvider` per process, built by the composition root (not the SDK's global
provider, so a process can set tracing up again, as the tests do): a `BatchSpanProcessor`
(spans are exported from a thread, in batches, never on the request path) and the
OTLP/HTTP exporter. The exporter reads the standard `OTEL_EXPORTER_OTLP_*` variables
(headers, timeout, compression, certificates) itself. Sampling is decided before the SDK
is called (`gateway.tracing.new_trace`, or the parent's flags): the SDK is asked only
for spans to record, so its sampler keeps every new trace and follows the parent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from gateway import __version__
from gateway.core.trace_context import TraceParent, format_traceparent
from gateway.settings import TracingSettings

_KINDS = {
    "internal": SpanKind.INTERNAL,
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}


#: The span id the next span started in this context gets, when it was chosen before
#: the span (`Backend.start(..., span_id=...)`); random otherwise.
_preset_span_id: ContextVar[int | None] = ContextVar("gateway_preset_span_id", default=None)


class _PresetIds(RandomIdGenerator):
    """The SDK's random ids, except a span id chosen in advance (see `_preset_span_id`)."""

    def generate_span_id(self) -> int:
        preset = _preset_span_id.get()
        return super().generate_span_id() if preset is None else preset


def _remote(parent: TraceParent) -> SpanContext:
    return SpanContext(
        parent.trace_id, parent.span_id, is_remote=True, trace_flags=TraceFlags(parent.flags)
    )


#: One export to the collector, retries included, may take this long.
EXPORT_TIMEOUT_S = 5.0
#: Stopping waits this long at most for the last export: a collector that is down or
#: stalled must not hold up the process's stop (systemd's TimeoutStopSec is 30 s).
SHUTDOWN_TIMEOUT_S = 5.0


class Backend:
    """The process's tracer and what `gateway.tracing` asks of it."""

    def __init__(self, settings: TracingSettings, service_name: str) -> None:
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": service_name}),
            sampler=ParentBased(ALWAYS_ON),  # `sample_ratio` is applied before the SDK
            id_generator=_PresetIds(),
        )
        self.provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=settings.traces_url, timeout=EXPORT_TIMEOUT_S),
                export_timeout_millis=EXPORT_TIMEOUT_S * 1000,
            )
        )
        # With the collector down the SDK logs one "Queue full, dropping span" warning
        # per span, on the request path: only its errors are worth a log line.
        logging.getLogger("opentelemetry.sdk._shared_internal").setLevel(logging.ERROR)
        self.tracer = self.provider.get_tracer("gateway", __version__)

    def start(
        self,
        name: str,
        kind: str,
        attributes: Mapping[str, str | int | float | bool] | None,
        parent: Any,
        links: Sequence[TraceParent],
        start_ns: int | None,
        root: bool = False,
        span_id: int | None = None,
    ) -> trace.Span:
        if isinstance(parent, TraceParent):
            context = trace.set_span_in_context(trace.NonRecordingSpan(_remote(parent)))
        elif parent is not None:
            context = trace.set_span_in_context(parent)
        elif root:
            context = otel_context.Context()  # empty: a new trace
        else:
            context = None  # the current one
        preset = _preset_span_id.set(span_id)
        try:
            return self.tracer.start_span(
                name,
                context=context,
                kind=_KINDS[kind],
                attributes=attributes,
                links=[Link(_remote(link)) for link in links] or None,
                start_time=start_ns,
            )
        finally:
            _preset_span_id.reset(preset)

    def traceparent(self, span: Any) -> str:
        ctx = span.get_span_context()
        return format_traceparent(ctx.trace_id, ctx.span_id, int(ctx.trace_flags))

    def activate(self, span: Any) -> object:
        return otel_context.attach(trace.set_span_in_context(span))

    def deactivate(self, token: Any) -> None:
        otel_context.detach(token)

    def set_error(self, span: Any, error_class: str) -> None:
        span.set_status(Status(StatusCode.ERROR, error_class))

    def current_ids(self) -> tuple[str, str] | None:
        ctx = trace.get_current_span().get_span_context()
        if not ctx.is_valid:
            return None
        return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"

    def shutdown(self) -> None:
        """Export what is buffered and stop the export thread, waiting at most
        `SHUTDOWN_TIMEOUT_S` (the SDK's own wait is 30 s); spans still unsent are lost,
        which is better than a process that will not stop."""
        stopping = threading.Thread(target=self.provider.shutdown, daemon=True)
        stopping.start()
        stopping.join(SHUTDOWN_TIMEOUT_S)
